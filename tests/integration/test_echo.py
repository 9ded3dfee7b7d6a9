"""echo under every model: byte-exact payloads from 1 byte to 1 MiB."""

import random
import socket
import threading

import pytest

from conftest import EVE, SERVERS, recv_exactly, recv_until_closed

# every server, and the echo written in Eve (examples/eve/echo.eve)
ECHO_SERVERS = SERVERS + EVE


def echo_roundtrip(server, payload: bytes) -> bytes:
    """Send from one thread while reading in this one, so a large payload
    never deadlocks on full socket buffers."""
    s = server.connect(timeout=30)
    errors = []

    def send():
        try:
            s.sendall(payload)
        except OSError as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=send)
    t.start()
    try:
        got = recv_exactly(s, len(payload))
    finally:
        t.join(30)
        s.close()
    assert not errors, errors
    return got


@pytest.mark.parametrize("model", ECHO_SERVERS)
def test_echo_random_payloads_32_connections(serve, model):
    server = serve("echo", model)
    rng = random.Random(1234)
    sizes = [1, 2, 16, 1 << 20] + [int(2 ** rng.uniform(0, 20)) for _ in range(28)]
    payloads = [rng.randbytes(n) for n in sizes]
    results = [None] * len(payloads)
    failures = []

    def client(i):
        try:
            results[i] = echo_roundtrip(server, payloads[i])
        except Exception as e:
            failures.append((i, e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(payloads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    for i, p in enumerate(payloads):
        assert results[i] == p, f"payload {i} ({len(p)} bytes) came back different"


@pytest.mark.models()
def test_echo_ipv6(serve, model):
    server = serve("echo", model, listen="[::1]:0")
    assert server.family == socket.AF_INET6
    assert echo_roundtrip(server, b"over ipv6\n") == b"over ipv6\n"


@pytest.mark.parametrize("model", ECHO_SERVERS)
def test_echo_flushes_before_close_on_half_close(serve, model):
    server = serve("echo", model)
    s = server.connect()
    data = bytes(range(256)) * 1000
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    assert recv_until_closed(s) == data
    s.close()


@pytest.mark.models()
def test_many_sequential_connections(serve, model):
    """Connections come and go; nothing leaks or stalls."""
    server = serve("echo", model)
    for i in range(200):
        with server.connect() as s:
            msg = f"ping {i}".encode()
            s.sendall(msg)
            assert recv_exactly(s, len(msg)) == msg
