"""yard-serve --background-fib N (issue 22): the server keeps serving while it computes
fib(N) as the Eve study's Program 1, on coro's own workers or on an offload pool beside
the other models, checks every result, and says at exit how many it computed."""

import re
import subprocess

import pytest

from conftest import BIN, MODELS, recv_exactly, skip_unavailable

REPORT = re.compile(r"background fib\((\d+)\) (as tasks on the coroutine workers|on an offload "
                    r"pool): (\d+) computed in ([\d.]+) s")


@pytest.mark.parametrize("model", [m for m in ("coro", "epoll", "reactors", "thread", "uring")
                                   if m in MODELS])
def test_serves_while_computing(serve, model):
    skip_unavailable(model)
    srv = serve("echo", model, "--background-fib", "24")
    with srv.connect() as s:
        for i in range(300):
            msg = f"{i:05d} echo while computing ✓".encode()
            s.sendall(msg)
            assert recv_exactly(s, len(msg)) == msg
    assert srv.stop() == 0
    m = REPORT.search(srv.stderr())
    assert m, srv.stderr()
    assert int(m.group(1)) == 24
    assert (m.group(2) == "as tasks on the coroutine workers") == (model == "coro")
    assert int(m.group(3)) >= 1  # 300 round trips take far longer than one fib(24)


def test_stops_promptly_inside_a_big_computation(serve):
    """fib(45) takes minutes: SIGTERM must not wait for it (every task checks the stop)."""
    for model in ("coro", "epoll"):
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
