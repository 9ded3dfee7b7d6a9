"""What --listen listens on, as the papayaChat study tripped on it (issue 21): the same
C source listened on IPv6 only on FreeBSD, where IPV6_V6ONLY defaults to 1. Here
0.0.0.0:P is IPv4 only, [::]:P is dual-stack (IPV6_V6ONLY set to 0 explicitly, on every
platform) unless --ipv6-only, and the first line says the address; checked with IPv4
and IPv6 clients under every model."""

import socket
import subprocess

import pytest

from conftest import BIN, skip_unavailable


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


@pytest.mark.models()
def test_ipv6_any_is_dual_stack_unless_ipv6_only(serve, model):
    skip_unavailable(model)
    srv = serve("echo", model, listen="[::]:0")
    assert (srv.host, srv.family) == ("::", socket.AF_INET6)   # 'listening [::]:P'
    assert echoes(socket.AF_INET6, "::1", srv.port)
    assert echoes(socket.AF_INET, "127.0.0.1", srv.port)          # IPv4 too: dual-stack
    only = serve("echo", model, "--ipv6-only", listen="[::]:0")
    assert echoes(socket.AF_INET6, "::1", only.port)
    assert not echoes(socket.AF_INET, "127.0.0.1", only.port)


@pytest.mark.models(names=["epoll", "fork", "reactors"])
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


# --listen NAME:P resolves NAME and listens on every address it names. This machine's
# /etc/hosts may name only 127.0.0.1 for localhost (Debian's default names ::1 too), so
# the tests that need a known answer run the server in a mount namespace of its own
# with its own hosts file, and nsswitch.conf set to "files" so no lookup waits on DNS.
HOSTS = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"


def with_hosts(tmp_path, argv: list) -> list:
    """argv run in a private mount namespace whose /etc/hosts is HOSTS."""
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        pytest.skip("a private /etc/hosts needs a mount namespace (unshare --mount, as root): "
                    + probe.stderr.decode(errors="replace").strip())
    hosts, nss = tmp_path / "hosts", tmp_path / "nsswitch.conf"
    hosts.write_text(HOSTS)
    nss.write_text("hosts: files\n")
    script = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/nsswitch.conf && ' \
             'shift 2 && exec "$@"'
    return ["unshare", "--mount", "sh", "-c", script, "sh", hosts, nss, *map(str, argv)]


def serve_argv(model: str, listen: str, *flags) -> list:
    from conftest import model_args
    return [BIN / "yard-serve", "--app", "echo", *model_args(model), "--listen", listen, *flags]


@pytest.mark.models()
def test_localhost_listens_on_every_address_it_names(start_server, tmp_path, model):
    skip_unavailable(model)
    srv = start_server(with_hosts(tmp_path, serve_argv(model, "localhost:0")))
    # IPv4 first, then IPv6, one port: 'listening 127.0.0.1:P [::1]:P'.
    assert srv.addrs == [("127.0.0.1", srv.port), ("::1", srv.port)]
    assert echoes(socket.AF_INET, "127.0.0.1", srv.port)
    assert echoes(socket.AF_INET6, "::1", srv.port)
    # Several clients on each address, so that every loop's listeners take some.
    for _ in range(4):
        assert echoes(socket.AF_INET, "127.0.0.1", srv.port)
        assert echoes(socket.AF_INET6, "::1", srv.port)


def test_a_name_with_only_an_ipv6_address(start_server, tmp_path):
    srv = start_server(with_hosts(tmp_path, serve_argv("epoll", "ip6-localhost:0")))
    assert srv.addrs == [("::1", srv.port)]
    assert echoes(socket.AF_INET6, "::1", srv.port)
    assert not echoes(socket.AF_INET, "127.0.0.1", srv.port)


def test_a_fixed_port_on_every_address(start_server, tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = start_server(with_hosts(tmp_path, serve_argv("coro", f"localhost:{port}")))
    assert srv.addrs == [("127.0.0.1", port), ("::1", port)]
    assert echoes(socket.AF_INET6, "::1", port)


def test_a_name_that_does_not_resolve(tmp_path):
    argv = with_hosts(tmp_path, serve_argv("epoll", "no-such-host.invalid:0"))
    r = subprocess.run(argv, capture_output=True, timeout=20)
    assert r.returncode == 2
    assert b"cannot resolve 'no-such-host.invalid'" in r.stderr
    assert r.stdout == b""


def test_localhost_as_this_machine_names_it(serve):
    """Without the private hosts file: exactly the addresses the system's resolver
    gives for localhost, IPv4 first, each answering."""
    want = []
    for family, *_, sockaddr in socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM):
        if family in (socket.AF_INET, socket.AF_INET6) and sockaddr[0] not in want:
            want.append(sockaddr[0])
    want.sort(key=lambda a: ":" in a)
    srv = serve("echo", "epoll", listen="localhost:0")
    assert [h for h, _ in srv.addrs] == want
    for host, port in srv.addrs:
        assert echoes(socket.AF_INET6 if ":" in host else socket.AF_INET, host, port)
