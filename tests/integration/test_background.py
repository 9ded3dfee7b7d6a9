"""yard-serve --background-fib N (issue 22): the server keeps serving while it computes
fib(N) as the Eve study's Program 1, on coro's own workers or on an offload pool beside
the other models, checks every result, and says at exit how many it computed."""

import re
import subprocess
import time

import pytest

from conftest import BIN, models, recv_exactly, skip_unavailable

REPORT = re.compile(r"background fib\((\d+)\) (as tasks on the coroutine workers|on an offload "
                    r"pool): (\d+) computed in ([\d.]+) s")


@pytest.mark.models(names=["coro", "epoll", "reactors", "thread", "uring"])
def test_serves_while_computing(serve, model):
    skip_unavailable(model)
    srv = serve("echo", model, "--background-fib", "24")
    # Serve for at least 300 round trips and one second: one fib(24) takes milliseconds, and
    # a second leaves room for it on a machine busy with other tests.
    with srv.connect() as s:
        i, end = 0, time.monotonic() + 1.0
        while i < 300 or time.monotonic() < end:
            msg = f"{i:05d} echo while computing ✓".encode()
            s.sendall(msg)
            assert recv_exactly(s, len(msg)) == msg
            i += 1
    assert srv.stop() == 0
    m = REPORT.search(srv.stderr())
    assert m, srv.stderr()
    assert int(m.group(1)) == 24
    assert (m.group(2) == "as tasks on the coroutine workers") == (model == "coro")
    assert int(m.group(3)) >= 1


def test_stops_promptly_inside_a_big_computation(serve):
    """fib(45) takes minutes: SIGTERM must not wait for it (every task checks the stop).
    Both ways of computing: coro's own workers, and the offload pool (epoll)."""
    chosen = models(names=["coro", "epoll"])
    if not chosen:
        pytest.skip("neither coro nor epoll is among YARD_MODELS")
    for model in chosen:
        srv = serve("echo", model, "--background-fib", "45")
        with srv.connect() as s:
            s.sendall(b"x")
            assert recv_exactly(s, 1) == b"x"
        assert srv.stop(timeout=5) == 0
        m = REPORT.search(srv.stderr())
        assert m and int(m.group(3)) == 0, srv.stderr()


def test_background_fib_range():
    r = subprocess.run([BIN / "yard-serve", "--app", "echo", "--model", "epoll",
                        "--background-fib", "61"], capture_output=True, timeout=10)
    assert r.returncode == 2
    assert b"--background-fib" in r.stderr
