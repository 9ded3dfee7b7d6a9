"""Distributed runs on the test rig: a server host and two load hosts, each a network namespace
with its own sshd (yard rig), driven by `yard run --hosts` exactly as real hosts would be."""

import contextlib
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

from yard import rig as yrig  # noqa: E402
from yard.cgroup import make_group, maker_alive  # noqa: E402

DELAY_MS = 2      # per direction on every host's link, where the kernel has netem
RATE_BITS = 4_000_000  # every link shaped to 4 Mbit/s (tbf), which every kernel here has
WIRE_BYTES = 68   # an echoed 16 B message as an IP packet (20 + 32 TCP with timestamps + 16)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the rig needs root (network namespaces)"),
    pytest.mark.skipif(not Path("/usr/sbin/sshd").exists(), reason="needs openssh-server"),
    pytest.mark.skipif(not (BIN / "yard-load").exists(), reason=f"needs {BIN}/yard-load"),
    pytest.mark.xdist_group("rig"),  # one rig per machine: with test_rig.py, one at a time
]


def yard(*args, timeout=300, check=False):
    p = subprocess.run([sys.executable, "-m", "yard.cli", *map(str, args)], cwd=REPO,
                       capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


@pytest.fixture(scope="module")
def rig():
    """A server and two load hosts, every link shaped; with a delay where netem exists (the
    development VM's kernel has none: then the rig runs without it and the delay test says
    so)."""
    state = Path(f"/run/yard-dist-test-{os.getpid()}")
    delay = f"{DELAY_MS}ms"
    before = yard_groups()
    try:
        try:
            hosts = yrig.up(2, delay=delay, rate=f"{RATE_BITS}bit", state_dir=state)
        except yrig.RigError as e:
            if "netem" not in str(e):
                raise
            delay = None
            hosts = yrig.up(2, rate=f"{RATE_BITS}bit", state_dir=state)
        yield state, Path(hosts), delay
    finally:
        yrig.down(state)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert "yard-rig" not in left, left
        assert not state.exists()
        # Nothing an agent made outlives the rig, its cgroups included (tests running beside
        # this one may have groups of their own meanwhile: only the new dead ones count).
        assert not {g for g in yard_groups() - before if not maker_alive(Path(g).name)}


@pytest.fixture(scope="module")
def synced_rig(rig):
    """The rig with this build on every host: synced once for the tests that only need it
    there (the first test checks the sync itself, from a rig without it)."""
    yard("hosts", "sync", rig[1], check=True)
    return rig


def _local_group_kind():
    g = make_group(f"yard-{os.getpid()}-probe")
    g.cleanup()
    return g.kind


LOCAL_GROUP_KIND = _local_group_kind() if os.geteuid() == 0 else None


def yard_groups():
    """The harness's cgroups (yard-<pid>-...) present on this machine."""
    return {str(d) for d in Path("/sys/fs/cgroup").glob("**/yard-[0-9]*-*") if d.is_dir()}


def ns_pids(ns):
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


def comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def trials(results):
    latest = results / "latest"
    return [json.loads(p.read_text()) for p in sorted((latest / "raw").rglob("*.json"))]


def smoke_run(tmp_path, experiment, hosts):
    """yard run experiments/EXPERIMENT.toml --suite smoke --hosts HOSTS: its trials."""
    p = yard("--quiet", "--results-dir", tmp_path, "run", f"experiments/{experiment}.toml",
             "--suite", "smoke", "--hosts", hosts)
    assert p.returncode == 0, p.stderr
    return trials(tmp_path)


@pytest.mark.timing  # every host starts its load within 50 ms of the agreed time
def test_sync_then_a_distributed_echo_run_merges_exactly(rig, tmp_path):
    _, hosts, delay = rig
    p = yard("hosts", "check", hosts)
    assert p.returncode == 1 and "load1" in p.stdout and "differ or are missing" in p.stdout
    # run refuses while the hosts lack this build, naming one
    p = yard("--quiet", "--results-dir", tmp_path, "run", "experiments/echo_scaling.toml",
             "--suite", "smoke", "--hosts", hosts)
    assert p.returncode != 0 and "does not have this build" in p.stderr
    yard("hosts", "sync", hosts, check=True)
    assert yard("hosts", "check", hosts).returncode == 0

    ts = smoke_run(tmp_path, "echo_scaling", hosts)
    assert {t["alternative"] for t in ts} == {"epoll", "reactors"}
    for t in ts:
        assert t["status"] == "ok", t["problems"]
        merged = t["load"]["stdout_json"]
        rows = t["hosts"]
        assert sorted(rows) == ["load1", "load2"]
        # The merged count is the sum of the hosts' own counts, and with no warm-up each host's
        # log holds every round trip its JSON counted.
        assert merged["messages"] == sum(r["window_messages"] for r in rows.values()) > 0
        for r in rows.values():
            assert r["window_messages"] == r["messages"], r
            assert abs(r["start_skew_s"]) < 0.05, r
        # The server's shaped link carries every reply: at most the rate's worth of packets
        # (its bucket too) in the window, and by Little's law, with every connection always
        # waiting, the mean latency is at least connections / that throughput.
        conns = 2 * t["point"]["connections"]  # the smoke's connections, on each load host
        cap = (RATE_BITS / 8 * t["load"]["stdout_json"]["window_s"] + 2 * 65536 + 3000) \
            / WIRE_BYTES / t["load"]["stdout_json"]["window_s"]
        assert merged["throughput_per_s"] <= cap, (merged, cap)
        assert merged["latency_us"]["mean"] >= conns / cap * 1e6, (merged, cap)
        if delay:  # every round trip crosses two delayed host links
            assert merged["latency_us"]["min"] >= 2 * DELAY_MS * 1000 * 0.95, merged
        # The server was measured on its host: in a cgroup wherever this machine can make
        # one (as a local trial would be), its CPU, and its clean exit.
        assert t["cgroup"]["kind"] == LOCAL_GROUP_KIND, t["cgroup"]
        assert t["server_exit"] == 0 and t["metrics"]["cpu_s"] > 0
        assert t["commands"]["server"][t["commands"]["server"].index("--listen") + 1] \
            .startswith("198.18.0.1:")
    html = (tmp_path / "latest" / "report.html").read_text()
    assert "Distributed run" in html and "<h4>Load hosts</h4>" in html


def test_a_distributed_rest_run(synced_rig, tmp_path):
    _, hosts, delay = synced_rig
    ts = smoke_run(tmp_path, "rest_scaling", hosts)
    assert {t["alternative"] for t in ts} == {"epoll", "coro"}
    for t in ts:
        assert t["status"] == "ok", t["problems"]
        merged = t["load"]["stdout_json"]
        assert merged["messages"] == sum(r["window_messages"] for r in t["hosts"].values()) > 0
        assert merged["errors"] == 0
        if delay:
            assert merged["latency_us"]["min"] >= 2 * DELAY_MS * 1000 * 0.95


def test_latency_includes_the_rigs_delay(synced_rig, tmp_path):
    _, hosts, delay = synced_rig
    if not delay:
        pytest.skip("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so the rig cannot "
                    "add delay; the shaped-rate bound of the echo test runs instead")
    for t in smoke_run(tmp_path, "echo_scaling", hosts):
        for r in t["hosts"].values():
            assert r["latency_us"]["min"] >= 2 * DELAY_MS * 1000 * 0.95, r


def echo_experiment(tmp_path, name, load_flags, duration):
    """An experiment file: epoll echo, one trial, yard-load echo with these flags."""
    flags = ", ".join(f'"{f}"' for f in load_flags)
    exp = tmp_path / f"{name}.toml"
    exp.write_text(f"""
[experiment]
name = "{name}"
[servers]
app = "echo"
models = ["epoll"]
[load]
argv = ["{{bin}}/yard-load", "echo", "--target", "{{target}}", {flags},
        "--duration", "{{duration}}s", "--json"]
[run]
duration = {duration}
repetitions = 1
""")
    return exp


def test_a_host_under_its_target_rate_makes_the_trial_invalid(synced_rig, tmp_path):
    # 40,000 echoes/s per host cannot cross a 4 Mbit/s link (about 7,400 of these packets/s).
    _, hosts, _ = synced_rig
    exp = echo_experiment(tmp_path, "overrate", ["--connections", "8", "--rate", "40000"], 2)
    p = yard("--quiet", "--results-dir", tmp_path, "run", exp, "--hosts", hosts)
    ts = trials(tmp_path)
    assert ts and all(t["status"] == "invalid" for t in ts), [t["problems"] for t in ts]
    assert any("load1" in m and "of its target 40000/s" in m for m in ts[0]["problems"])
    assert "invalid" in p.stderr


def test_an_unreachable_host_is_named(synced_rig, tmp_path):
    _, hosts, _ = synced_rig
    bad = tmp_path / "hosts.toml"
    text = hosts.read_text()
    # load2's sshd is not on port 2222
    i = text.index('name = "load2"')
    bad.write_text(text[:i] + text[i:].replace("port = 22\n", "port = 2222\n", 1))
    p = yard("hosts", "check", bad)
    assert p.returncode == 1 and "host load2 (root@198.18.0.3): unreachable" in p.stderr, p.stderr
    p = yard("--quiet", "--results-dir", tmp_path, "run", "experiments/echo_scaling.toml",
             "--suite", "smoke", "--hosts", bad)
    assert p.returncode == 1 and "host load2" in p.stderr and "unreachable" in p.stderr


def test_an_experiment_naming_pki_runs_over_tls_on_the_hosts(synced_rig, tmp_path):
    """{pki} under --hosts: the run's certificates, valid for the server host's address, are
    copied to every host and named there; the load hosts verify the server's certificate
    against the run's CA by that address (no --tls-insecure), so a trial that counts round
    trips proves the certificates made it to both sides."""
    _, hosts, _ = synced_rig
    exp = tmp_path / "pki_echo.toml"
    exp.write_text("""
[experiment]
name = "pki_echo"
[servers]
app = "echo"
models = ["epoll"]
[[servers.extra]]
label = "epoll+tls"
model = "epoll"
argv = ["{bin}/yard-serve", "--app", "echo", "--model", "epoll", "--tls-listen", "127.0.0.1:0",
        "--tls-cert", "{pki}/ecdsa.pem", "--tls-key", "{pki}/ecdsa.key"]
[load]
argv = ["{bin}/yard-load", "echo", "--target", "{target}", "--tls-ca", "{pki}/ca.pem",
        "--connections", "4", "--duration", "{duration}s", "--json"]
[run]
duration = 1
repetitions = 1
""")
    p = yard("--quiet", "--results-dir", tmp_path, "run", exp, "--hosts", hosts)
    ts = {t["alternative"]: t for t in trials(tmp_path)}
    assert sorted(ts) == ["epoll", "epoll+tls"], p.stderr
    for label, t in ts.items():
        assert t["status"] == "ok", (label, t["problems"])
        merged = t["load"]["stdout_json"]
        assert merged["errors"] == 0 and merged["messages"] > 0, merged
    cmds = ts["epoll+tls"]["commands"]
    server = cmds["server"]
    assert server[server.index("--tls-cert") + 1].endswith("/.yard-pki/ecdsa.pem"), server
    assert server[server.index("--tls-listen") + 1].startswith("198.18.0.1:"), server
    for name in ("load1", "load2"):
        load = cmds[name]
        assert load[load.index("--tls-ca") + 1].endswith("/.yard-pki/ca.pem"), load
        assert load[load.index("--target") + 1].startswith("tls:198.18.0.1:"), load


# Last of the tests on the module's rig: it kills everything in load2's namespace, that
# host's sshd included, so no test after it can reach load2.
def test_a_load_host_dying_mid_run_fails_the_trial_and_leaves_nothing(synced_rig, tmp_path):
    state, hosts, _ = synced_rig
    exp = echo_experiment(tmp_path, "long_echo", ["--connections", "4"], 20)
    run = subprocess.Popen([sys.executable, "-m", "yard.cli", "--quiet", "--results-dir",
                            str(tmp_path), "run", str(exp), "--hosts", str(hosts)], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    try:
        deadline = time.monotonic() + 30
        while not any(comm(p) == "yard-load" for p in ns_pids("yard-rig-load2")):
            assert time.monotonic() < deadline, "the load never started on load2"
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        # The host dies: everything in its namespace, its sshd included, killed at once.
        for pid in ns_pids("yard-rig-load2"):
            with contextlib.suppress(ProcessLookupError):  # one that just ended
                os.kill(pid, signal.SIGKILL)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    ts = trials(tmp_path)
    assert len(ts) == 1 and ts[0]["status"] == "failed"
    assert any("load2" in p and "went away" in p for p in ts[0]["problems"]), ts[0]["problems"]
    # Nothing of the trial is left on the hosts that still run: only their sshd.
    for ns in ("yard-rig-server", "yard-rig-load1", "yard-rig-load2"):
        deadline = time.monotonic() + 10
        while True:
            left = [(p, comm(p)) for p in ns_pids(ns) if comm(p) not in (None, "sshd")]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not left, (ns, left)
