"""yard-load's open loop (--rate), --pipeline and --threads: the stall
calibration of the load-generator issue (what an open loop shows and a closed
loop hides), byte-exact pipelining and exact counts across threads."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BIN, wait_for

LOAD = BIN / "yard-load"


def load_json(*args, timeout=60):
    r = subprocess.run([LOAD, *map(str, args), "--json"], capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return r.returncode, (json.loads(r.stdout) if r.stdout else None), r.stderr


def established_to(port: int) -> int:
    """Established client connections to 127.0.0.1:port, from /proc/net/tcp."""
    n = 0
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = row.split()
        if int(f[2].rsplit(":", 1)[1], 16) == port and f[3] == "01":
            n += 1
    return n


def stalled_run(server, *flags, conns=4):
    """Run yard-load for 3 s and SIGSTOP the server for 1 s while it runs."""
    p = subprocess.Popen([LOAD, "echo", "--target", f"127.0.0.1:{server.port}", "--connections",
                          str(conns), "--duration", "3s", "--json", *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: established_to(server.port) >= conns, what="the load's connections")
        time.sleep(0.5)                 # the stall sits inside the measured window
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)             # the stimulus: a 1 s stall
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    return json.loads(out)


@pytest.mark.timing  # the generator keeps its schedule through the server's stall
@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_stall_open_loop_shows_it_closed_loop_hides_it(serve, io):
    server = serve("echo", "epoll")
    opened = stalled_run(server, "--rate", "2000", "--io", io)
    closed = stalled_run(server, "--io", io)
    spectrum = {s["percentile"]: s["value_us"] for s in opened["latency_spectrum_us"]}
    assert opened["loop"] == "open" and closed["loop"] == "closed"
    # Every request due during the stall waited for it: the top of the
    # open-loop distribution is the stall.
    assert opened["latency_us"]["p999"] >= 0.9e6, opened["latency_us"]
    assert opened["latency_us"]["max"] >= 0.9e6
    assert max(v for p, v in spectrum.items() if p >= 99.9) >= 0.9e6
    # The closed loop sent nothing while it waited, so only one request per
    # connection saw the stall and its p99 stays small.
    assert opened["latency_us"]["max"] >= closed["latency_us"]["p99"] + 0.8e6, \
        (opened["latency_us"], closed["latency_us"])
    # The generator itself kept its schedule (the stall is the server's).
    assert not opened["invalid"], opened
    assert abs(opened["achieved_rate"] - 2000) / 2000 < 0.05


@pytest.mark.timing  # 3000 requests due in one second, every one sent on time
def test_open_loop_keeps_its_rate(serve):
    server = serve("echo", "epoll")
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 10,
                           "--rate", 3000, "--duration", "1s")
    assert rc == 0, err
    assert d["target_rate"] == 3000 and d["errors"] == 0
    # 3000 requests due in the window, every one answered.
    assert 2990 <= d["messages"] <= 3000
    assert d["behind_schedule_max_ms"] < 10
    assert d["behind_schedule"] is False and d["invalid"] is False


def test_a_rate_beyond_reach_ends_and_counts_what_never_left(serve):
    # One connection cannot carry five million round trips a second. What
    # fell due in the 1 s window may leave for one more window; then the run
    # ends and counts the rest as unsent, so every due request is accounted.
    server = serve("echo", "epoll")
    t0 = time.monotonic()
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 1,
                           "--rate", 5_000_000, "--duration", "1s", timeout=30)
    took = time.monotonic() - t0
    assert rc == 0, err
    assert took < 10, took
    assert d["errors"] == 0 and d["unsent"] > 0
    assert d["messages"] + d["unsent"] == 5_000_000
    assert d["achieved_rate"] < 0.5 * d["target_rate"]

def test_open_loop_with_a_message_count(serve):
    server = serve("echo", "epoll")
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 5,
                           "--rate", 5000, "--messages", 200)
    assert rc == 0, err
    assert d["messages"] == 1000
    # 200 requests per connection at 1000/s per connection: about 0.2 s.
    assert 0.15 < d["duration_s"] < 1.0


@pytest.mark.models()
def test_pipelined_echo_is_byte_exact(serve, model):
    server = serve("echo", model)
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 8,
                           "--pipeline", 16, "--messages", 2000, "--size", 100)
    assert rc == 0, err
    assert d["messages"] == 8 * 2000 and d["errors"] == 0
    assert d["bytes_sent"] == d["bytes_received"] == 8 * 2000 * 100
    assert d["pipeline"] == 16


@pytest.mark.parametrize("mode_flags", [[], ["--pipeline", "4"], ["--rate", "20000"]])
def test_counter_exact_across_threads(serve, mode_flags):
    server = serve("counter", "reactors")
    rc, d, err = load_json("counter", "--target", f"127.0.0.1:{server.port}", "--connections", 12,
                           "--threads", 3, "--ops", 400, "--read-ratio", "0.5", *mode_flags)
    assert rc == 0, err
    assert d["threads"] == 3 and d["messages"] == 12 * 400
    assert d["count_final"] == d["count_initial"] + d["increments"]


def test_threads_split_connections_and_merge_histograms(serve, tmp_path):
    server = serve("echo", "epoll")
    hist = tmp_path / "h.hgrm"
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 7,
                           "--threads", 3, "--messages", 300, "--hist-out", hist)
    assert rc == 0, err
    assert d["messages"] == 7 * 300
    # The merged histogram holds every round trip once.
    total = [line for line in hist.read_text().splitlines() if line.strip()
             and not line.startswith("#") and line.split()[0][0].isdigit()]
    assert int(total[-1].split()[2]) == 7 * 300


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_pipelined_server_death_is_reported_not_hung(serve, io):
    server = serve("echo", "epoll")
    p = subprocess.Popen([LOAD, "echo", "--io", io, "--target", f"127.0.0.1:{server.port}",
                          "--connections",
                          "4", "--pipeline", "8", "--duration", "30s", "--timeout", "2s",
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    wait_for(lambda: established_to(server.port) >= 4, what="the load's connections")
    server.kill()
    out, err = p.communicate(timeout=20)
    assert p.returncode == 1
    d = json.loads(out)
    assert d["errors"] >= 1 and d["first_error"]


@pytest.mark.parametrize("args,needle", [
    (["echo", "--rate", "0"], b"--rate: expected requests per second"),
    (["echo", "--rate", "fast"], b"--rate: expected requests per second"),
    (["echo", "--pipeline", "0"], b"--pipeline: expected a whole number from 1 to 4096"),
    (["echo", "--threads", "0"], b"--threads: expected a whole number from 1 to 256"),
    (["echo", "--threads", "4", "--connections", "2"], b"--threads: more threads than connections"),
    (["rate", "--rate", "10", "--bandwidth", "1Mbps", "--duration", "1s"],
     b"--rate and --pipeline belong to the request/response modes"),
])
def test_usage_errors_name_the_flag(args, needle):
    r = subprocess.run([LOAD, *args, "--target", "127.0.0.1:9"], capture_output=True, timeout=10)
    assert r.returncode == 2
    assert needle in r.stderr, r.stderr
