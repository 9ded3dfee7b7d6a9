"""--poller epoll|poll for the event-loop models: the same loop over another readiness
system call. Every model-parameterised test runs epoll-poll (the default sweep of
tests/variants.py); here reactors over poll, many connections on one poll set, and the
flag's usage errors."""

import socket
import subprocess

import pytest

from conftest import BIN, recv_exactly


# The variants over poll, each where its model is among YARD_MODELS: epoll-poll
# where epoll is (the ASan run), reactors-poll where reactors is (the TSan run).
@pytest.mark.models("poll", extra=["reactors-poll"], by_model=True)
def test_echo_over_poll_with_many_connections(serve, model):
    """600 connections open at once, each echoing its own bytes, then half of them closed
    and the rest used again: entries leave the poll set as connections go."""
    server = serve("echo", model)
    conns = [server.connect(timeout=30) for _ in range(600)]
    for i, s in enumerate(conns):
        s.sendall(f"hello {i} ✓".encode())
    for i, s in enumerate(conns):
        assert recv_exactly(s, len(f"hello {i} ✓".encode())) == f"hello {i} ✓".encode()
    for s in conns[::2]:
        s.close()
    for i, s in list(enumerate(conns))[1::2]:
        s.sendall(b"again %d" % i)
        assert recv_exactly(s, len(b"again %d" % i)) == b"again %d" % i
    for s in conns[1::2]:
        s.close()


@pytest.mark.models("poll", extra=["reactors-poll"], by_model=True)
def test_counter_over_poll_is_exact(serve, model):
    server = serve("counter", model)
    socks = [server.connect(timeout=30) for _ in range(8)]
    for s in socks:
        s.sendall(b"\x01" * 500)
    for s in socks:
        recv_exactly(s, 8 * 500)
    s = socks[0]
    s.sendall(b"\x00")
    assert int.from_bytes(recv_exactly(s, 8), "big") == 8 * 500
    for s in socks:
        s.close()


@pytest.mark.parametrize("argv, needle", [
    (["--model", "thread", "--poller", "poll"], b"--poller"),
    (["--model", "epoll", "--poller", "kqueue"], b"expected 'epoll' or 'poll'"),
])
def test_poller_usage_errors(argv, needle):
    r = subprocess.run([BIN / "yard-serve", "--app", "echo", *argv, "--listen", "127.0.0.1:0"],
                       capture_output=True, timeout=10)
    assert r.returncode == 2, r
    assert needle in r.stderr, r.stderr
