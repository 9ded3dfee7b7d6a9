"""The uring model where the kernel refuses io_uring, and what only uring has.

yard-test-no-uring runs a command under a seccomp filter that makes the
io_uring system calls fail with EPERM, as container runtimes' default
profiles do."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, ROOT, model_unavailable, skip_unavailable, wait_for

NO_URING = BIN / "yard-test-no-uring"


def no_uring(*argv, **kw):
    return subprocess.run([str(NO_URING), *map(str, argv)], capture_output=True, text=True,
                          timeout=60, **kw)


def test_serve_exits_1_naming_the_cause():
    r = no_uring(BIN / "yard-serve", "--app", "echo", "--model", "uring",
                 "--listen", "127.0.0.1:0")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "listening" not in r.stdout
    assert "--model uring is unavailable on this machine" in r.stderr, r.stderr
    assert "seccomp" in r.stderr, r.stderr
    # The other models do not need io_uring and still run under the filter.
    r = no_uring(BIN / "yard-serve", "--app", "echo", "--model", "epoll", "--version")
    assert r.returncode == 0, r.stderr


def test_list_models_marks_it_unavailable_with_the_reason():
    r = no_uring(BIN / "yard-serve", "--list-models", "--json")
    assert r.returncode == 0, r.stderr
    models = {m["name"]: m for m in json.loads(r.stdout)}
    assert models["uring"]["available"] is False
    assert "EPERM" in models["uring"]["unavailable_reason"]
    assert all(m["available"] and m["unavailable_reason"] is None
               for name, m in models.items() if name != "uring")
    text = no_uring(BIN / "yard-serve", "--list-models").stdout
    assert "(unavailable here: io_uring_setup is refused (EPERM)" in text
    # Without the filter this machine has io_uring (the other tests need it).
    here = json.loads(subprocess.run([BIN / "yard-serve", "--list-models", "--json"],
                                     capture_output=True, text=True).stdout)
    assert {m["name"]: m["available"] for m in here}["uring"] == (model_unavailable("uring")
                                                                   is None)


def test_harness_skips_it_with_the_reason(tmp_path):
    """`yard run` under the filter: the uring alternative is skipped and
    said so (on the console, in meta.json and in the report); the others
    run."""
    exp = tmp_path / "tiny.toml"
    exp.write_text("""
[experiment]
name = "tiny"
[servers]
app = "echo"
models = ["epoll", "uring"]
[load]
argv = ["{bin}/yard-load", "echo", "--target", "{target}", "--connections", "2",
        "--messages", "50", "--json"]
[run]
duration = 1
repetitions = 1
""")
    res = tmp_path / "results"
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"}
    r = no_uring(sys.executable, "-m", "yard.cli", "--results-dir", res, "--bin-dir", BIN,
                 "run", exp, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "tiny: skipping uring: --model uring is unavailable here: io_uring_setup is " \
           "refused (EPERM)" in r.stdout, r.stdout[-3000:]
    meta = json.loads((res / "latest" / "meta.json").read_text())
    assert [(s["alternative"], s["model"]) for s in meta["skipped"]] == [("uring", "uring")]
    raw = [json.loads(p.read_text()) for p in (res / "latest" / "raw").rglob("*.json")]
    assert {t["alternative"] for t in raw} == {"epoll"}
    # Every epoll trial ran in full (a tiny run may be flagged invalid when
    # the generator's core is busy: that is the harness's verdict, not ours).
    for t in raw:
        assert t["status"] in ("ok", "invalid"), t["problems"]
        assert (t["load"]["stdout_json"]["messages"], t["load"]["stdout_json"]["errors"]) == (100, 0)
    html = (res / "latest" / "report.html").read_text()
    assert "Skipped on this machine: tiny uring (--model uring: io_uring_setup is refused" in html


STATS = re.compile(r"uring ring (\d+): turns (\d+), io_uring_enter (\d+), sqes (\d+), cqes (\d+), "
                   r"accepted (\d+), receives armed (\d+), out of buffers (\d+), cancels (\d+), "
                   r"cq overflow turns (\d+), completions lost (\d+), registered sockets (\d+), "
                   r"news reads again (\d+), setup (\S+)")


def ring_stats(stderr: str) -> list[dict]:
    keys = ["ring", "turns", "enters", "sqes", "cqes", "accepted", "recv_arms", "enobufs",
            "cancels", "overflow_turns", "lost", "fixed", "news_again"]
    return [dict(zip(keys, map(int, m.groups()[:-1])), setup=m.group(14))
            for m in STATS.finditer(stderr)]


def echo_load(srv, connections: int, messages: int) -> dict:
    r = subprocess.run([BIN / "yard-load", "echo", "--target", f"127.0.0.1:{srv.port}",
                        "--connections", str(connections), "--messages", str(messages),
                        "--size", "100", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_stats_count_the_rings_work(serve):
    """--stats: one line per ring at exit; every connection accepted once,
    one receive armed per connection, no completion lost."""
    skip_unavailable("uring")
    srv = serve("echo", "uring-1", "--stats")
    d = echo_load(srv, 10, 200)
    assert (d["messages"], d["errors"]) == (2000, 0)
    assert srv.stop() == 0
    (st,) = ring_stats(srv.stderr())
    assert st["accepted"] == 10 and st["recv_arms"] == 10 and st["fixed"] == 0, st
    # Each round trip is a receive and a send completion at least.
    assert st["cqes"] >= 2 * 2000 and st["sqes"] >= 2000, st
    assert st["lost"] == 0 and st["enters"] <= st["turns"] + st["sqes"], st
    assert st["setup"] in ("single_issuer+defer_taskrun", "plain")


def test_two_rings_share_the_connections(serve):
    skip_unavailable("uring")
    srv = serve("echo", "uring", "--stats")  # --workers 2
    d = echo_load(srv, 40, 50)
    assert (d["messages"], d["errors"]) == (2000, 0)
    assert srv.stop() == 0
    stats = ring_stats(srv.stderr())
    assert sorted(s["ring"] for s in stats) == [0, 1]
    assert sum(s["accepted"] for s in stats) == 40


def test_fixed_files_register_every_socket_and_release_it(serve):
    """--fixed-files on: each socket is registered with the ring, and
    unregistered when it closes (a registered socket the ring still held
    would never send its FIN: the client would hang below)."""
    skip_unavailable("uring")
    srv = serve("echo", "uring-1", "--fixed-files", "on", "--stats")
    d = echo_load(srv, 10, 100)
    assert (d["messages"], d["errors"]) == (1000, 0)
    for _ in range(3):  # closed by the server: the client sees the end of input
        with srv.connect(timeout=5) as s:
            s.sendall(b"x")
            assert s.recv(1) == b"x"
            s.shutdown(socket.SHUT_WR)
            assert s.recv(1) == b""
    assert srv.stop() == 0
    (st,) = ring_stats(srv.stderr())
    assert st["fixed"] == 13 and st["lost"] == 0, st


def test_running_out_of_receive_buffers_loses_nothing(serve):
    """One receive buffer of 512 bytes for 30 busy connections: receives
    end with ENOBUFS and are armed again; every byte still comes back."""
    skip_unavailable("uring")
    srv = serve("echo", "uring-1", "--ring-bufs", "1", "--ring-buf-size", "512", "--stats")
    d = echo_load(srv, 30, 300)
    assert (d["messages"], d["errors"]) == (9000, 0)
    assert srv.stop() == 0
    (st,) = ring_stats(srv.stderr())
    assert st["enobufs"] > 0 and st["recv_arms"] > 30, st


def test_ring_bufs_must_be_a_power_of_two():
    r = subprocess.run([BIN / "yard-serve", "--app", "echo", "--model", "uring", "--ring-bufs",
                        "3"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--ring-bufs must be a power of two (got 3)" in r.stderr


PLAIN = {"YARD_URING_PLAIN": "1"}


@pytest.mark.parametrize("app", ["echo", "counter"])
def test_the_plain_ring_of_older_kernels_serves_as_well(serve, app):
    """Kernels before 6.1 have neither SINGLE_ISSUER nor DEFER_TASKRUN: the
    ring is set up without them (forced here with YARD_URING_PLAIN) and
    every request is still answered, byte for byte and count for count."""
    skip_unavailable("uring")
    srv = serve(app, "uring-1", "--stats", env=PLAIN)
    mode = ["echo", "--size", "100"] if app == "echo" else ["counter", "--read-ratio", "0.5"]
    r = subprocess.run([BIN / "yard-load", *mode, "--target", f"127.0.0.1:{srv.port}",
                        "--connections", "8", "--messages", "300", "--io", "uring", "--json"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, **PLAIN})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["messages"], d["errors"], d["io"]) == (2400, 0, "uring")
    if app == "counter":
        assert d["count_final"] - d["count_initial"] == d["increments"] > 0
    assert srv.stop() == 0
    (st,) = ring_stats(srv.stderr())
    # counter: two more connections read the count before and after the run
    assert st["setup"] == "plain" and st["lost"] == 0, st
    assert st["accepted"] == 8 + (2 if app == "counter" else 0), st


def test_the_plain_ring_writes_the_sink_file(serve, tmp_path):
    skip_unavailable("uring")
    out = tmp_path / "sink.out"
    srv = serve("sink", "uring-1", "--out", str(out), "--flush", "each", "--stats", env=PLAIN)
    payload = "".join(f"line {i} ✓ строка\n" for i in range(2000)).encode()
    with socket.create_connection(("127.0.0.1", srv.port)) as c:
        c.sendall(payload)
    wait_for(lambda: out.exists() and out.stat().st_size == len(payload), what="the sink file")
    assert srv.stop() == 0
    assert out.read_bytes() == payload
    (st,) = ring_stats(srv.stderr())
    assert st["setup"] == "plain", st
