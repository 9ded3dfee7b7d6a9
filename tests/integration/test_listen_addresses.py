"""What --listen listens on, as the papayaChat study tripped on it (issue 21): the same
C source listened on IPv6 only on FreeBSD, where IPV6_V6ONLY defaults to 1. Here
0.0.0.0:P is IPv4 only, [::]:P is dual-stack (IPV6_V6ONLY set to 0 explicitly, on every
platform) unless --ipv6-only, and the first line says the address; checked with IPv4
and IPv6 clients under every model."""

import socket
import subprocess

import pytest

from conftest import BIN, MODELS, skip_unavailable


def echoes(family: int, host: str, port: int) -> bool:
    """True when a client of this family reaches the echo server and gets its bytes back;
    False when the connection is refused."""
    try:
        s = socket.create_connection((host, port), timeout=10) if family == socket.AF_INET \
            else socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            s.settimeout(10)
            s.connect((host, port))
    except ConnectionRefusedError:
        return False
    with s:
        s.sendall(b"dual \xe2\x9c\x93")
        got = b""
        while len(got) < 8:
            chunk = s.recv(64)
            if not chunk:
                break
            got += chunk
        return got == b"dual \xe2\x9c\x93"


@pytest.mark.parametrize("model", MODELS)
def test_ipv6_any_is_dual_stack_unless_ipv6_only(serve, model):
    skip_unavailable(model)
    srv = serve("echo", model, listen="[::]:0")
    assert (srv.host, srv.family) == ("::", socket.AF_INET6)   # 'listening [::]:P'
    assert echoes(socket.AF_INET6, "::1", srv.port)
    assert echoes(socket.AF_INET, "127.0.0.1", srv.port)          # IPv4 too: dual-stack
    only = serve("echo", model, "--ipv6-only", listen="[::]:0")
    assert echoes(socket.AF_INET6, "::1", only.port)
    assert not echoes(socket.AF_INET, "127.0.0.1", only.port)


@pytest.mark.parametrize("model", [m for m in ("epoll", "fork", "reactors") if m in MODELS])
def test_ipv4_any_is_ipv4_only(serve, model):
    srv = serve("echo", model, listen="0.0.0.0:0")
    assert (srv.host, srv.family) == ("0.0.0.0", socket.AF_INET)
    assert echoes(socket.AF_INET, "127.0.0.1", srv.port)
    assert not echoes(socket.AF_INET6, "::1", srv.port)


def test_ipv6_only_needs_an_ipv6_listen():
    r = subprocess.run([BIN / "yard-serve", "--app", "echo", "--model", "epoll", "--listen",
                        "0.0.0.0:0", "--ipv6-only"], capture_output=True, timeout=10)
    assert r.returncode == 2
    assert b"--ipv6-only applies to an IPv6 --listen" in r.stderr
