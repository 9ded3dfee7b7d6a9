"""Hosts files, and the agent that runs on each host (driven here locally, without SSH)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness_paths  # noqa: F401
from harness_paths import BIN, REPO
from yard.cgroup import sweep_orphans
from yard.hosts import HostsFileError, load_hosts, manifest

GOOD = """
[defaults]
user = "bench"
identity = "~/.ssh/id_ed25519"
ssh_options = ["-o", "ProxyJump=bastion"]

[server]
ssh = "10.0.0.1"
dir = "/opt/switchyard"
cpus = [0, 1, 2, 3]
address = "10.1.0.1"

[[load]]
ssh = "root@10.0.0.2"
port = 2222
dir = "/opt/switchyard"
cpus = [0, 1]

[[load]]
name = "east"
ssh = "10.0.0.3"
dir = "/srv/yard"
"""


def write(tmp_path, text):
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p




def test_hosts_file_fields(tmp_path):
    h = load_hosts(write(tmp_path, GOOD))
    assert h.server.ssh == "bench@10.0.0.1" and h.server.address == "10.1.0.1"
    assert h.server.cpus == [0, 1, 2, 3] and h.server.identity == os.path.expanduser(
        "~/.ssh/id_ed25519")
    assert [x.name for x in h.load] == ["load1", "east"]
    assert h.load[0].ssh == "root@10.0.0.2" and h.load[0].port == 2222
    assert h.load[1].address == "10.0.0.3"  # from the destination when not given
    argv = h.load[0].ssh_argv("true")
    assert argv[0] == "ssh" and argv[-2:] == ["root@10.0.0.2", "true"]
    assert ["-p", "2222"] == argv[1:3] and "BatchMode=yes" in argv and "ProxyJump=bastion" in argv


@pytest.mark.parametrize("old,new,where", [
    ('dir = "/srv/yard"', 'dir = "srv"', "load[1].dir"),
    ('port = 2222', 'port = 0', "load[0].port"),
    ('port = 2222', 'password = "hunter2"', "no password"),
    ('cpus = [0, 1]\n', 'cpus = "0-1"\n', "load[0].cpus"),
    ('name = "east"', 'name = "server"', "unique"),
    ('ssh = "10.0.0.3"', '', "load[1].ssh"),
    ('[defaults]', '[nodes]\n[defaults]', "unknown table"),
])
def test_bad_hosts_files_are_refused_by_field(tmp_path, old, new, where):
    with pytest.raises(HostsFileError, match=where.replace("[", r"\[").replace("]", r"\]")):
        load_hosts(write(tmp_path, GOOD.replace(old, new, 1)))


def test_no_load_host_is_an_error(tmp_path):
    text = GOOD.split("[[load]]")[0]
    with pytest.raises(HostsFileError, match="at least one"):
        load_hosts(write(tmp_path, text))


def test_the_manifest_covers_the_binaries_and_the_agent():
    man = manifest(REPO)
    assert "build/bin/yard-serve" in man and "build/bin/yard-load" in man
    assert "python/yard/agent.py" in man and "python/yard/server.py" in man
    assert all(len(h) == 64 for h in man.values())


class Agent:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-m", "yard.agent"], cwd=REPO,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env={**os.environ, "PYTHONPATH": str(REPO / "python")})

    def ask(self, msg):
        self.send(msg)
        return self.receive()

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def receive(self):
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        return self.p.wait(timeout=20)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.02)


needs_bin = pytest.mark.skipif(not (BIN / "yard-serve").exists(), reason=f"needs {BIN}/yard-serve")


@needs_bin
def test_agent_serves_measures_and_stops():
    a = Agent()
    t = a.ask({"op": "time"})
    assert abs(t["t"] - time.time()) < 5 and t["pid"] == a.p.pid
    ans = a.ask({"op": "serve", "argv": [str(BIN / "yard-serve"), "--app", "echo", "--model",
                                         "epoll", "--listen", "127.0.0.1:0"], "cpus": [0],
                 "interval": 0.1})
    host, port = ans["target"].rsplit(":", 1)
    assert host == "127.0.0.1" and alive(ans["pid"])
    assert a.ask({"op": "sample"}) == {"op": "sample"}
    load = a.ask({"op": "load", "argv": [str(BIN / "yard-load"), "echo", "--target",
                                         ans["target"], "--connections", "4", "--duration",
                                         "1s", "--json"], "cpus": [], "timeout": 60})
    assert load["op"] == "started"
    done = a.receive()
    assert done["rc"] == 0 and json.loads(done["stdout"])["messages"] > 0
    assert done["left"] == []
    out = a.ask({"op": "stop"})
    assert out["server_exit"] == 0 and out["problems"] == []
    assert out["totals"]["cpu_s"] > 0 and out["samples"]
    wait_gone(ans["pid"])
    assert a.close() == 0


def serving_and_loading():
    """An agent with an echo server and a 60 s load against it: (agent, server pid, load pgid)."""
    a = Agent()
    ans = a.ask({"op": "serve", "argv": [str(BIN / "yard-serve"), "--app", "echo", "--model",
                                         "epoll", "--listen", "127.0.0.1:0"]})
    a.send({"op": "load", "argv": [str(BIN / "yard-load"), "echo", "--target", ans["target"],
                                   "--connections", "2", "--duration", "60s", "--json"]})
    pgid = a.receive()["pgid"]
    assert alive(pgid) and alive(ans["pid"])
    return a, ans["pid"], pgid


@needs_bin
def test_agent_input_ending_mid_load_kills_the_load_and_the_server():
    a, server, load = serving_and_loading()
    a.close()  # as if the harness's SSH connection broke
    wait_gone(load)
    wait_gone(server)


def agent_groups(pid):
    """The cgroup directories an agent of this pid made (yard-<pid>-...), in any hierarchy."""
    return [d for d in Path("/sys/fs/cgroup").glob(f"**/yard-{pid}-*") if d.is_dir()]


@needs_bin
def test_a_killed_agent_takes_its_children_with_it():
    a, server, load = serving_and_loading()
    made = agent_groups(a.p.pid)
    a.p.send_signal(signal.SIGKILL)
    a.p.wait()
    wait_gone(load)
    wait_gone(server)
    # Nothing could remove its server's cgroup when it died; the next group made on this
    # host removes it, as `yard rig down` does on the rig.
    if not made:
        pytest.skip("no cgroup could be made here: the /proc walk leaves nothing behind")
    sweep_orphans()
    assert agent_groups(a.p.pid) == []
