"""`yard rig`: network namespaces that look like a server and N load hosts
reachable by ssh. Needs root, `ip netns` and OpenSSH (client and server).

Every test takes its rig down in a finally (the rig_dir fixture), and waits on
conditions with deadlines, never on a fixed sleep.
"""

import harness_paths  # noqa: F401  (puts python/ on sys.path)
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from harness_paths import REPO
from yard import rig


def _why_skip() -> str | None:
    if os.geteuid() != 0:
        return "yard rig needs root"
    if not shutil.which("ip") or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        return "ip netns is unavailable"
    if not shutil.which("ssh") or not os.access(rig.SSHD, os.X_OK):
        return f"needs ssh and {rig.SSHD} (openssh-client, openssh-server)"
    if rig.rig_namespaces():
        return "a yard rig is already up on this machine (yard rig down first)"
    return None


SKIP = _why_skip()
if SKIP:
    print(f"tests/harness/test_rig.py: skipped: {SKIP}", file=sys.stderr)
# One rig per machine (its lock, its yard-rig-* namespaces): in a parallel run every test
# that makes one runs on the same worker, one after another (tests/parallel.py).
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""),
              pytest.mark.xdist_group("rig")]

ENV = {**os.environ, "PYTHONPATH": str(REPO / "python")}
ENV.pop(rig.HOOK_ENV, None)


def yard_rig(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "yard.cli", "rig", *args], capture_output=True,
                          text=True, env=env or ENV, timeout=timeout, stdin=subprocess.DEVNULL)


def wait_for(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def nothing_left(state_dir: Path) -> None:
    assert rig.rig_namespaces() == []
    assert rig._rig_sshd_pids(state_dir) == []
    assert not state_dir.exists()


@pytest.fixture
def rig_dir():
    d = Path(f"/run/yard-rig-test-{os.getpid()}")
    try:
        yield d
    finally:
        rig.down(d)


def up(state_dir: Path, *args: str) -> dict:
    """yard rig up; returns the hosts file read back ({path, defaults, server, load})."""
    p = yard_rig("up", "--state-dir", str(state_dir), *args)
    assert p.returncode == 0, p.stderr
    hf = Path(p.stdout.strip().splitlines()[-1])
    assert hf.is_file()
    v = tomllib.loads(hf.read_text())
    v["path"] = hf
    return v


def ssh(hosts: dict, host: dict, command: str, **kw):
    """Real ssh, with what the hosts file says (a host's ssh_options replace the defaults')."""
    d = hosts["defaults"]
    argv = ["ssh", "-i", d["identity"], "-p", str(host["port"]),
            *host.get("ssh_options", d["ssh_options"]), host["ssh"], command]
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=kw.pop("timeout", 30), **kw)


def ssh_popen(hosts: dict, host: dict, command: str) -> subprocess.Popen:
    d = hosts["defaults"]
    argv = ["ssh", "-i", d["identity"], "-p", str(host["port"]),
            *host.get("ssh_options", d["ssh_options"]), host["ssh"], command]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)


def readline(p: subprocess.Popen, timeout: float) -> bytes:
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not sel.select(left):
            raise AssertionError(f"no line from {p.args[-1][:60]!r} in {timeout} s (got {buf!r})")
        c = os.read(p.stdout.fileno(), 1)
        if not c:
            raise AssertionError(f"EOF from {p.args[-1][:60]!r}: {p.stderr.read().decode()}")
        buf += c
    return buf


# Run on the rig's hosts by ssh (python3 is on every host: they are this machine).
LISTENER = r"""
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(1)
print("listening", s.getsockname()[1], flush=True)
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
n = 0
while (b := c.recv(65536)):
    n += len(b)
    if sys.argv[2] == "echo":
        c.sendall(b)
if sys.argv[2] == "sink":
    c.sendall(str(n).encode())
c.close()
"""

CLIENT = r"""
import json, socket, sys, time
addr, port, mode, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
c = socket.create_connection((addr, port), timeout=20)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
out = {}
if mode == "echo":
    rtts = []
    for _ in range(n):
        t = time.perf_counter(); c.sendall(b"x")
        assert c.recv(1) == b"x"
        rtts.append((time.perf_counter() - t) * 1000)
    rtts.sort()
    out = {"min_ms": rtts[0], "median_ms": rtts[len(rtts) // 2]}
else:
    t = time.perf_counter(); c.sendall(b"\0" * n); c.shutdown(socket.SHUT_WR)
    got = b""
    while (b := c.recv(100)):
        got += b
    out = {"bytes": int(got), "secs": time.perf_counter() - t}
c.close()
print(json.dumps(out))
"""


def between(hosts: dict, src: dict, dst: dict, mode: str, n: int) -> dict:
    """A TCP exchange from host src to a listener on host dst, at dst's address."""
    py = lambda code: "python3 -c " + shlex.quote(code)  # noqa: E731
    lst = ssh_popen(hosts, dst, f"{py(LISTENER)} {dst['address']} {mode}")
    try:
        line = readline(lst, 20).split()
        assert line[0] == b"listening", line
        p = ssh(hosts, src, f"{py(CLIENT)} {dst['address']} {int(line[1])} {mode} {n}")
        assert p.returncode == 0, p.stderr
        assert lst.wait(timeout=20) == 0
        return json.loads(p.stdout)
    finally:
        if lst.poll() is None:
            lst.kill()
            lst.wait()


def test_up_hosts_reachable_by_ssh_and_each_other(rig_dir):
    hosts = up(rig_dir, "--load-hosts", "2")
    d = hosts["defaults"]
    assert d["user"] == "root" and Path(d["identity"]).is_file()
    all_hosts = [hosts["server"], *hosts["load"]]
    assert [h["name"] for h in all_hosts] == ["server", "load1", "load2"]
    assert [h["address"] for h in all_hosts] == ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
    ncpu = len(os.sched_getaffinity(0))
    assert hosts["server"]["cpus"] == [min(os.sched_getaffinity(0))]
    for h in all_hosts:
        assert h["ssh"] == f"root@{h['address']}" and h["port"] == 22
        assert len(h["cpus"]) == 1 and (ncpu == 1 or h is hosts["server"] or h["cpus"] != hosts["server"]["cpus"])
        dd = Path(h["dir"])
        assert dd.is_dir() and not any(dd.iterdir()) and dd.stat().st_mode & 0o777 == 0o755
        opts = " ".join(h["ssh_options"])
        assert "StrictHostKeyChecking=yes" in opts and "BatchMode=yes" in opts
        assert f"relay yard-rig-{h['name']} %h %p" in opts
        # Real ssh, strict host key checking against the rig's known_hosts.
        p = ssh(hosts, h, "ip -brief addr")
        assert p.returncode == 0, p.stderr
        assert f"{h['address']}/24" in p.stdout
        for other in all_hosts:
            if other is not h:
                assert f"{other['address']}/" not in p.stdout
    # load1 reaches the server over the rig's bridge; without --delay a round trip is quick.
    r = between(hosts, hosts["load"][0], hosts["server"], "echo", 20)
    assert r["min_ms"] < 5, r
    # Nothing of the rig in the root namespace.
    root = subprocess.run(["ip", "-4", "-brief", "addr"], capture_output=True, text=True).stdout
    assert "198.18." not in root


def _netem_available() -> bool:
    ns = f"yardtest-probe-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        return subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem",
                               "delay", "1ms"], capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)


NETEM = None if SKIP else _netem_available()
if NETEM is False:
    print("tests/harness/test_rig.py: this kernel has no netem qdisc: the delay is the rig's "
          "user-space switch", file=sys.stderr)


def test_delay_adds_twice_per_round_trip(rig_dir):
    # netem where the kernel has it, else the user-space switch: the same delay either way.
    hosts = up(rig_dir, "--load-hosts", "1", "--delay", "5ms")
    r = between(hosts, hosts["load"][0], hosts["server"], "echo", 10)
    assert r["min_ms"] >= 10.0, r
    assert r["min_ms"] < 60, r
    s = rig.status(rig_dir)
    assert s["state"] == "up", s["problems"]
    if NETEM:
        assert s["switch"] is None
    else:
        pid = s["switch"]["pid"]
        assert rig._alive(pid) and pid in rig.netns_pids("yard-rig-net")
        yard_rig("down", "--state-dir", str(rig_dir))
        assert not rig._alive(pid)
        nothing_left(rig_dir)


def test_rate_shapes_links(rig_dir):
    hosts = up(rig_dir, "--load-hosts", "1", "--rate", "16mbit")
    s = rig.status(rig_dir)
    q = {n["name"]: " ".join(n["qdiscs"]) for n in s["namespaces"]}
    assert "tbf" in q["yard-rig-server"] and "tbf" in q["yard-rig-load1"]
    assert q["yard-rig-net"].count("tbf") == 2
    # 4 MB at 16 Mbit/s (2 MB/s) is about 2 s, less what the buckets let through at once.
    r = between(hosts, hosts["load"][0], hosts["server"], "sink", 4_000_000)
    assert r["bytes"] == 4_000_000
    assert r["secs"] > 1.5, r


def test_bad_values_and_non_root_refused(rig_dir, monkeypatch):
    for args, word in [(("--delay", "5"), "--delay"), (("--delay=-1ms",), "--delay"),
                       (("--delay", "20s"), "--delay"), (("--rate", "fast"), "--rate"),
                       (("--rate", "1bit"), "--rate")]:
        p = yard_rig("up", "--state-dir", str(rig_dir), "--load-hosts", "1", *args)
        assert p.returncode == 1 and word in p.stderr, (args, p.stderr)
    p = yard_rig("up", "--state-dir", str(rig_dir), "--load-hosts", "0")
    assert p.returncode == 1 and "--load-hosts" in p.stderr
    p = yard_rig("up", "--state-dir", "/tmp/yard-rig-x", "--load-hosts", "1")
    assert p.returncode == 1 and "StrictModes" in p.stderr
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(rig.RigError, match="root"):
        rig.up(1, state_dir=rig_dir)
    monkeypatch.undo()
    nothing_left(rig_dir)


def test_second_up_refused(rig_dir):
    up(rig_dir, "--load-hosts", "1")
    p = yard_rig("up", "--state-dir", str(rig_dir), "--load-hosts", "1")
    assert p.returncode == 1
    assert "already exists" in p.stderr and "yard-rig-server" in p.stderr
    assert yard_rig("status", "--state-dir", str(rig_dir)).returncode == 0


def test_address_in_use_elsewhere_refused(rig_dir):
    ns = f"yardtest-scratch-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "addr", "add", "198.19.7.7/32", "dev", "lo"], check=True)
        p = yard_rig("up", "--state-dir", str(rig_dir), "--load-hosts", "1")
        assert p.returncode == 1
        assert ns in p.stderr and "198.19.7.7" in p.stderr, p.stderr
        nothing_left(rig_dir)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)


@pytest.mark.parametrize("sig,step", [(signal.SIGINT, "sshd"), (signal.SIGTERM, "links")])
def test_interrupted_up_leaves_nothing(rig_dir, sig, step):
    env = {**ENV, rig.HOOK_ENV: f"pause:{step}"}
    p = subprocess.Popen([sys.executable, "-m", "yard.cli", "rig", "up", "--load-hosts", "2",
                          "--state-dir", str(rig_dir)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        st = wait_for(lambda: (rig.load_state(rig_dir) or {}).get("paused") and rig.load_state(rig_dir),
                      20, f"up to pause at {step}")
        assert len(rig.rig_namespaces()) == 4
        if step == "sshd":
            assert all(rig._alive(h["sshd_pid"]) for h in st["hosts"])
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 128 + sig, err
        assert "interrupted" in err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    nothing_left(rig_dir)


def test_failing_up_leaves_nothing(rig_dir):
    env = {**ENV, rig.HOOK_ENV: "fail:keys"}
    p = yard_rig("up", "--state-dir", str(rig_dir), "--load-hosts", "1", env=env)
    assert p.returncode == 1 and "keys" in p.stderr
    nothing_left(rig_dir)


def test_down_removes_everything(rig_dir):
    hosts = up(rig_dir, "--load-hosts", "2")
    st = rig.load_state(rig_dir)
    sshds = [h["sshd_pid"] for h in st["hosts"]]
    # Something started over ssh that outlives its session: down must kill it too.
    p = ssh(hosts, hosts["load"][1], "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
    assert p.returncode == 0, p.stderr
    stray = int(p.stdout.split()[-1])
    assert stray in rig.netns_pids("yard-rig-load2")
    p = yard_rig("down", "--state-dir", str(rig_dir))
    assert p.returncode == 0, p.stderr
    assert "removed" in p.stdout
    assert not any(rig._alive(pid) for pid in [*sshds, stray])
    nothing_left(rig_dir)
    assert not Path(hosts["defaults"]["identity"]).exists()
    p = yard_rig("down", "--state-dir", str(rig_dir))
    assert p.returncode == 0 and "nothing to remove" in p.stdout


def test_down_without_state_file(rig_dir):
    up(rig_dir, "--load-hosts", "1")
    (rig_dir / rig.STATE_FILE).unlink()
    assert yard_rig("status", "--state-dir", str(rig_dir)).returncode == 2
    p = yard_rig("down", "--state-dir", str(rig_dir))
    assert p.returncode == 0, p.stderr
    nothing_left(rig_dir)


def test_status_exit_codes(rig_dir):
    assert yard_rig("status", "--state-dir", str(rig_dir)).returncode == 1
    up(rig_dir, "--load-hosts", "1")
    p = yard_rig("status", "--json", "--state-dir", str(rig_dir))
    assert p.returncode == 0, p.stdout
    s = json.loads(p.stdout)
    assert s["state"] == "up" and all(h["sshd_alive"] for h in s["hosts"])
    pid = s["hosts"][0]["sshd_pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not rig._alive(pid), 10, "the killed sshd to die")
    p = yard_rig("status", "--json", "--state-dir", str(rig_dir))
    assert p.returncode == 2
    assert any("sshd of server" in x for x in json.loads(p.stdout)["problems"])
    assert yard_rig("down", "--state-dir", str(rig_dir)).returncode == 0
    assert yard_rig("status", "--state-dir", str(rig_dir)).returncode == 1
