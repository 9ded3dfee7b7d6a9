"""yard-load echo: the foundation contract (closed loop, every byte
verified, JSON fields), and its behaviour against bad servers."""

import json
import os
import socket
import subprocess
import threading

import pytest

from conftest import BIN, wait_for

LOAD = BIN / "yard-load"
JSON_FIELDS = {"throughput_per_s", "latency_us", "messages", "errors", "mode", "connections",
               "duration_s", "bytes_sent", "bytes_received", "generator_cpu_s",
               "generator_cpu_pct", "generator_saturated", "behind_schedule", "invalid", "latency_spectrum_us"}


def load(*args, timeout=60):
    return subprocess.run([LOAD, *map(str, args)], capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.models()
def test_echo_counts_every_round_trip(serve, model):
    server = serve("echo", model)
    r = load("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 20,
             "--messages", 500, "--size", 64, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert JSON_FIELDS <= set(d)
    assert d["mode"] == "echo" and d["connections"] == 20
    assert d["messages"] == 20 * 500 and d["errors"] == 0
    assert d["bytes_sent"] == d["bytes_received"] == 20 * 500 * 64
    lat = d["latency_us"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert d["throughput_per_s"] > 0
    spectrum = d["latency_spectrum_us"]
    assert spectrum[0]["percentile"] == 0 and spectrum[-1]["percentile"] == 100
    values = [p["value_us"] for p in spectrum]
    assert values == sorted(values)


def test_large_messages_and_hist_out(serve, tmp_path):
    server = serve("echo", "epoll")
    hist = tmp_path / "latency.hgrm"
    r = load("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 3, "--messages", 20,
             "--size", 300000, "--hist-out", hist)
    assert r.returncode == 0, r.stderr
    assert b"round trips   60 in" in r.stdout
    text = hist.read_text()
    assert "Percentile" in text and "#[Max" in text and "Total count    =           60]" in text


def test_human_summary_names_the_numbers(serve):
    server = serve("echo", "thread")
    r = load("echo", "--target", f"127.0.0.1:{server.port}", "--messages", 50)
    assert r.returncode == 0
    for word in [b"round trips", b"latency (us)", b"p99.9", b"errors        0", b"generator CPU"]:
        assert word in r.stdout


def corrupting_server(flip_after: int):
    """A one-connection echo server that flips a byte after flip_after bytes."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen()

    def serve_one():
        c, _ = ls.accept()
        seen = 0
        while True:
            data = c.recv(65536)
            if not data:
                break
            out = bytearray(data)
            if seen <= flip_after < seen + len(out):
                out[flip_after - seen] ^= 0xFF
            seen += len(data)
            c.sendall(out)
        c.close()

    threading.Thread(target=serve_one, daemon=True).start()
    return ls


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_corrupted_echo_is_an_error(io):
    ls = corrupting_server(flip_after=16 * 3 + 5)
    try:
        r = load("echo", "--io", io, "--target", f"127.0.0.1:{ls.getsockname()[1]}",
                 "--messages", 10,
                 "--size", 16, "--timeout", "5s")
    finally:
        ls.close()
    assert r.returncode == 1
    assert b"message 3: echoed byte 5 differs" in r.stderr


def group_size(pgid: int) -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                n += os.getpgid(int(pid)) == pgid
            except ProcessLookupError:
                pass
    return n


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_server_dying_mid_run_is_reported_not_hung(serve, io):
    server = serve("echo", "fork")
    p = subprocess.Popen([str(LOAD), "echo", "--io", io, "--target", f"127.0.0.1:{server.port}",
                          "--connections", "10", "--messages", "10000000", "--timeout", "5s"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Once a child serves each of the 10 connections, kill the whole server.
    wait_for(lambda: group_size(server.pgid) >= 11, what="10 connection processes")
    server.kill()
    out, err = p.communicate(timeout=20)
    assert p.returncode == 1
    assert b"errors        10" in out
    assert b"server closed it" in err or b"read:" in err


def test_unreachable_target_fails_fast():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    r = load("echo", "--target", f"127.0.0.1:{port}", timeout=15)
    assert r.returncode == 1
    assert b"Connection refused" in r.stderr


@pytest.mark.parametrize("args, needle", [
    ([], b"a MODE comes first"),
    (["flood"], b"unknown mode 'flood'"),
    (["echo"], b"--target HOST:PORT is required"),
    (["echo", "--target", "nowhere"], b"--target: bad address"),
    (["echo", "--target", "127.0.0.1:1", "--connections", "0"], b"--connections: expected"),
    (["echo", "--target", "127.0.0.1:1", "--size", "x"], b"--size: expected"),
    (["echo", "--target", "127.0.0.1:1", "--timeout", "never"], b"--timeout: expected"),
    (["echo", "--target", "127.0.0.1:1", "--bogus"], b"unknown option '--bogus'"),
])
def test_usage_errors(args, needle):
    r = load(*args)
    assert r.returncode == 2
    assert needle in r.stderr


def test_help():
    r = load("--help")
    assert r.returncode == 0
    for flag in [b"--target", b"--connections", b"--messages", b"--size", b"--timeout", b"--cpu",
                 b"--hist-out", b"--json"]:
        assert flag in r.stdout
