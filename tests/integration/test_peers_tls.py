"""The reference peers (Go, Node, Erlang, Elixir, Rust on tokio) take yard-serve's TLS
flags (docs/tls.md, docs/peers.md):
--tls-listen HOST:PORT (repeatable, beside or instead of --listen), --tls-cert
FILE, --tls-key FILE. For every peer and every app it serves: the app's
conformance over TLS, the listening line, the usage and file errors, a clean
SIGTERM, and yard-load's TLS echo against each peer's echo. Certificates come
from a test CA made by the openssl command (tlslib)."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import hashlib
import subprocess
import time

import pytest

from conftest import (BIN, LISTENING, ROOT, read_line, recv_exactly, run_threads, stop_clean,
                      wait_for)
from tlslib import client_context, fingerprint, make_pki, tls_connect

# name: (peers/ directory, extra launcher flags, toolchain it needs). Kept
# here rather than shared with test_peers.py: TLS is checked only for the
# peers that have it.
PEERS = {
    "go": ("go", [], "go"),
    "node": ("node", [], "node"),
    "node-cluster": ("node", ["--cluster", "2"], "node"),
    "erlang": ("erlang", [], "erl"),
    "elixir": ("elixir", [], "elixir"),
    "rust-tokio": ("rust", ["--runtime", "tokio"], "cargo"),
}
CHUNK = 64 * 1024
WAIT = 15.0
_built: set[str] = set()


@pytest.fixture(params=list(PEERS))
def peer(request):
    return request.param


def launcher(peer: str) -> list:
    """The peer's launcher and its fixed flags, building it (make -C peers) once."""
    directory, extra, tool = PEERS[peer]
    if os.environ.get("YARD_PEERS", "1") == "0":
        pytest.skip("YARD_PEERS=0")
    if tool == "go":
        if not (shutil.which("go") or os.path.exists("/usr/local/go/bin/go")):
            pytest.skip("no Go toolchain")
    elif tool == "cargo":
        if not (shutil.which("cargo") or os.path.exists(os.path.expanduser("~/.cargo/bin/cargo"))):
            pytest.skip("no cargo (Rust >= 1.85; see peers/Makefile)")
    elif not shutil.which(tool):
        pytest.skip(f"no {tool} toolchain")
    if directory not in _built:
        r = subprocess.run(["make", "-C", str(ROOT / "peers"), directory],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"make -C peers {directory} failed:\n{r.stdout}\n{r.stderr}"
        _built.add(directory)
    return [ROOT / "peers" / directory / "run", *extra]


def tls_flags(pki, *listens: str) -> list[str]:
    flags = []
    for a in listens or ("127.0.0.1:0",):
        flags += ["--tls-listen", a]
    return flags + ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]


def start_peer(start_server, peer, app, pki, *flags, plain=True, tls=("127.0.0.1:0",)):
    """The peer serving app on a TLS listener (or several), beside a plain
    one unless plain is False."""
    listen = ["--listen", "127.0.0.1:0"] if plain else []
    return start_server([*launcher(peer), "--app", app, *listen, *tls_flags(pki, *tls), *flags])


def run_peer(peer, *args, timeout=60) -> subprocess.CompletedProcess:
    """A peer that is expected to refuse its command line."""
    return subprocess.run([str(a) for a in [*launcher(peer), *args]], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def echo_exact(sock, data: bytes) -> None:
    """Sends data in pieces and reads each one's echo before the next."""
    for off in range(0, len(data), CHUNK):
        piece = data[off:off + CHUNK]
        sock.sendall(piece)
        assert recv_exactly(sock, len(piece)) == piece, f"echo differs at offset {off}"


def tls_port(srv, i: int = 0) -> tuple[str, int]:
    return srv.tls_addrs[i]


# ---- the listening line ------------------------------------------------------

def test_listening_line_tls_only(peer, start_server, pki):
    srv = start_peer(start_server, peer, "echo", pki, plain=False)
    assert srv.addrs == [] and len(srv.tls_addrs) == 1
    assert srv.tls_addrs[0][0] == "127.0.0.1" and srv.tls_addrs[0][1] > 0
    with tls_connect(tls_port(srv), pki) as s:
        echo_exact(s, b"tls only\n")
    stop_clean(srv)


def test_listening_line_side_by_side(peer, start_server, pki):
    """--listen and two --tls-listen: one line, the plain address first, each
    TLS one as tls:HOST:PORT; each port speaks what the line says."""
    srv = start_peer(start_server, peer, "echo", pki, tls=("127.0.0.1:0", "127.0.0.1:0"))
    assert len(srv.addrs) == 1 and len(srv.tls_addrs) == 2
    ports = [srv.port] + [p for _, p in srv.tls_addrs]
    assert len(set(ports)) == 3, ports
    with srv.connect() as s:
        s.sendall(b"plain\n")
        assert recv_exactly(s, 6) == b"plain\n"
    for addr in srv.tls_addrs:
        with tls_connect(addr, pki) as s:
            echo_exact(s, b"secret %d\n" % addr[1])
    stop_clean(srv)


def test_ipv6_tls_listener(peer, start_server, pki):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as e:
        pytest.skip(f"no IPv6 loopback: {e}")
    srv = start_peer(start_server, peer, "echo", pki, tls=("[::1]:0",))
    assert srv.tls_addrs[0][0] in ("::1", "[::1]"), srv.tls_addrs
    with tls_connect(("::1", srv.tls_addrs[0][1]), pki) as s:
        echo_exact(s, b"over IPv6\n")
    stop_clean(srv)


def test_listening_line_format(peer, tmp_path, pki):
    """The line itself, byte for byte: what the harness's parser expects."""
    argv = [*launcher(peer), "--app", "counter", "--listen", "127.0.0.1:0",
            *tls_flags(pki)]
    p = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        line = read_line(p.stdout, WAIT)
        assert LISTENING.match(line), line
        assert re.fullmatch(rb"listening 127\.0\.0\.1:\d+ tls:127\.0\.0\.1:\d+\n", line), line
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(5) == 0


# ---- the apps over TLS -------------------------------------------------------

@pytest.mark.parametrize("size", [1, 100, 1 << 20])
def test_echo_byte_exact_over_tls(peer, start_server, pki, size):
    srv = start_peer(start_server, peer, "echo", pki)
    data = random.Random(size).randbytes(size)

    def client(i):
        with tls_connect(tls_port(srv), pki, timeout=30) as s:
            echo_exact(s, data[i:] + data[:i])

    run_threads([lambda i=i: client(i) for i in range(3)])
    # The plain listener beside it is untouched.
    with srv.connect() as s:
        s.sendall(b"still plain")
        assert recv_exactly(s, 11) == b"still plain"
    stop_clean(srv)


def test_counter_exact_over_tls(peer, start_server, pki):
    srv = start_peer(start_server, peer, "counter", pki, plain=False)
    clients, increments, batch = 4, 2000, 100

    def client():
        last = 0
        with tls_connect(tls_port(srv), pki, timeout=30) as s:
            for _ in range(increments // batch):
                s.sendall(b"\x01" * batch)
                data = recv_exactly(s, 8 * batch)
                for i in range(batch):
                    v = int.from_bytes(data[8 * i:8 * i + 8], "big")
                    assert v > last, f"reply {v} after {last}"
                    last = v

    run_threads([client] * clients)
    with tls_connect(tls_port(srv), pki) as s:
        s.sendall(b"\x00")
        assert int.from_bytes(recv_exactly(s, 8), "big") == clients * increments
        # A bad byte still closes the connection after the replies before it.
        s.sendall(b"\x01\x07")
        assert int.from_bytes(recv_exactly(s, 8), "big") == clients * increments + 1
        s.settimeout(WAIT)
        try:
            assert s.recv(1) == b""
        except (ConnectionResetError, OSError):
            pass
    stop_clean(srv)


@pytest.mark.parametrize("flush", ["each", "buffered"])
def test_sink_over_tls_writes_exactly_what_was_sent(peer, start_server, pki, tmp_path, flush):
    out = tmp_path / "sink.out"
    srv = start_peer(start_server, peer, "sink", pki, "--out", str(out), "--flush", flush)
    # Each connection sends bytes of its own alphabet, so its stream can be
    # picked out of the interleaved file; one of them is plain.
    n = 3
    alphabet = [bytes(range(i * 64, i * 64 + 64)) for i in range(n)]
    sent = {i: random.Random(i).randbytes(200_000).translate(alphabet[i] * 4) for i in range(n)}

    def client(i):
        s = srv.connect(30) if i == n - 1 else tls_connect(tls_port(srv), pki, timeout=30)
        with s:
            view = memoryview(sent[i])
            for off in range(0, len(view), 7000):
                s.sendall(view[off:off + 7000])
            finish_sending(s)

    run_threads([lambda i=i: client(i) for i in range(n)])
    total = sum(map(len, sent.values()))
    wait_for(lambda: out.exists() and out.stat().st_size >= total, WAIT, "all bytes in --out")
    data = out.read_bytes()
    assert len(data) == total
    for i in range(n):
        others = bytes(set(range(256)) - set(alphabet[i]))
        assert data.translate(None, others) == sent[i], f"connection {i}"
    stop_clean(srv)


def finish_sending(s) -> None:
    """Half-closes s and reads until the server closes. A TLS 1.3 server sends
    session tickets after the handshake; a client that closes without having
    read them makes its kernel answer with a reset, which may discard bytes
    the server has not read yet. (SSLSocket.shutdown drops the TLS layer, so
    what is drained is raw records.)"""
    s.shutdown(socket.SHUT_WR)
    s.settimeout(WAIT)
    while True:
        try:
            if not s.recv(65536):
                return
        except ConnectionResetError:
            return


def https_request(srv, pki, method, path, body=None):
    """One request on a fresh HTTPS connection that verifies the test CA and
    the host name: (status, content type, body)."""
    host, port = tls_port(srv)
    c = http.client.HTTPSConnection("localhost", port, timeout=WAIT,
                                    context=client_context(pki))
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        c.close()


def test_rest_routes_over_https(peer, start_server, pki):
    srv = start_peer(start_server, peer, "rest", pki, "--bcrypt-cost", "4",
                     "--longpoll-ms", "100")
    assert https_request(srv, pki, "GET", "/")[0] == 200
    pw = json.dumps({"password": "s3cret"})
    assert https_request(srv, pki, "POST", "/password/set/alice", pw)[::2] == (200, b"OK")
    assert https_request(srv, pki, "POST", "/password/verify/alice", pw)[::2] == (200, b"OK")
    assert https_request(srv, pki, "POST", "/password/verify/alice",
                         json.dumps({"password": "nope"}))[0] == 403
    obj = {"name": "Alice", "tags": [1, "x"]}
    assert https_request(srv, pki, "POST", "/user/set/alice", json.dumps(obj))[::2] == (200, b"OK")
    code, ctype, body = https_request(srv, pki, "GET", "/user/get/alice")
    assert code == 200 and ctype.startswith("application/json") and json.loads(body) == obj
    assert https_request(srv, pki, "GET", "/user/get/nobody")[::2] == (400, b"User not found.")
    assert https_request(srv, pki, "GET", "/longPoll")[::2] == (200, b"OK")
    assert https_request(srv, pki, "GET", "/no/such/path")[0] == 404
    # Keep-alive over one TLS connection: two requests, two answers.
    c = http.client.HTTPSConnection("localhost", tls_port(srv)[1], timeout=WAIT,
                                    context=client_context(pki))
    for _ in range(2):
        c.request("GET", "/")
        r = c.getresponse()
        assert (r.status, r.read()) == (200, b"OK")
    c.close()
    # The plain listener serves the same stores.
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=WAIT)
    c.request("GET", "/user/get/alice")
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read()) == obj
    c.close()
    stop_clean(srv)


def read_lines(sock, n: int) -> list[bytes]:
    buf = b""
    sock.settimeout(WAIT)
    while buf.count(b"\n") < n:
        b = sock.recv(65536)
        assert b, f"closed after {buf!r}"
        buf += b
    lines = buf.split(b"\n")
    assert len(lines) == n + 1 and lines[-1] == b"", buf
    return [ln + b"\n" for ln in lines[:-1]]


def in_the_room(srv, pki, first) -> None:
    """Waits until first, a client that has sent nothing, is in the room. Its server side
    may still be finishing the handshake when the next client's line is read (seen under
    load), so a helper sends numbered lines until first gets one, then a last line up to
    which first reads, and leaves."""
    with tls_connect(tls_port(srv), pki) as helper:
        first.settimeout(0.05)
        got, k, deadline = b"", 0, time.monotonic() + WAIT
        while b"\n" not in got:
            assert time.monotonic() < deadline, "the first client never joined the room"
            helper.sendall(b"sync %d\n" % k)
            k += 1
            try:
                got += first.recv(65536)
            except TimeoutError:
                pass
        helper.sendall(b"synced\n")
        first.settimeout(WAIT)
        while not got.endswith(b"synced\n"):
            chunk = first.recv(65536)
            assert chunk, f"closed after {got!r}"
            got += chunk


def test_broadcast_over_tls_reaches_every_client(peer, start_server, pki):
    if peer == "node-cluster":
        pytest.skip("the Node peer refuses --cluster with broadcast (docs/peers.md)")
    srv = start_peer(start_server, peer, "broadcast", pki)
    clients = []
    # One at a time: a newcomer's line reaching every earlier client proves
    # that all of them are in the room (a peer puts a client in the room
    # before reading it). The last one is plain: the room spans listeners.
    for i in range(4):
        s = srv.connect() if i == 3 else tls_connect(tls_port(srv), pki)
        clients.append(s)
        if i == 0:
            in_the_room(srv, pki, s)
        else:
            s.sendall(b"join %d\n" % i)
            for other in clients[:-1]:
                assert read_lines(other, 1) == [b"join %d\n" % i]
    lines = [b"line %d \xf0\x9f\x94\x92 %s\n" % (j, b"x" * j) for j in range(50)]
    payload = b"".join(lines)
    for off in range(0, len(payload), 333):  # cut anywhere
        clients[0].sendall(payload[off:off + 333])
    for other in clients[1:]:
        assert read_lines(other, len(lines)) == lines
    # The sender got none of its own: the next thing it reads is another's.
    clients[2].sendall(b"done\n")
    assert read_lines(clients[0], 1) == [b"done\n"]
    for s in clients:
        s.close()
    stop_clean(srv)


def test_broadcast_over_tls_drops_a_client_that_does_not_read(peer, start_server, pki):
    """D never reads (a small receive buffer); A sends 16 MiB in 64 KiB lines, a batch at a
    time, each read by B before the next: B gets everything, D is closed once about 1 MiB
    waits for it (docs/peers.md), the peer serves on."""
    if peer == "node-cluster":
        pytest.skip("the Node peer refuses --cluster with broadcast (docs/peers.md)")
    srv = start_peer(start_server, peer, "broadcast", pki, plain=False)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    raw.settimeout(WAIT)
    raw.connect(tls_port(srv))
    d = client_context(pki).wrap_socket(raw, server_hostname="localhost")
    in_the_room(srv, pki, d)
    a = tls_connect(tls_port(srv), pki)
    a.sendall(b"join a\n")
    assert read_lines(d, 1) == [b"join a\n"]
    b = tls_connect(tls_port(srv), pki)
    b.sendall(b"join b\n")
    for s in (d, a):
        assert read_lines(s, 1) == [b"join b\n"]
    line = b"D" * (64 * 1024 - 1) + b"\n"
    for _ in range(256 // 8):
        a.sendall(line * 8)
        b.settimeout(WAIT)
        assert recv_exactly(b, len(line) * 8) == line * 8
    got, deadline = b"", time.monotonic() + 20
    d.settimeout(1)
    while True:  # D reads now: what was queued for it, then the end
        assert time.monotonic() < deadline, "D was never disconnected"
        try:
            chunk = d.recv(65536)
        except TimeoutError:
            continue
        except (ConnectionResetError, ssl.SSLError):
            break
        if not chunk:
            break
        got += chunk
    assert len(got) < len(line) * 256, "D received everything: it was not disconnected"
    assert (line * 256).startswith(got), "D's bytes are not the start of A's lines"
    a.sendall(b"still here\n")
    assert read_lines(b, 1) == [b"still here\n"]
    for s in (a, b, d):
        s.close()
    stop_clean(srv)


# ---- bad input, signals ------------------------------------------------------

def test_plain_text_on_tls_port_is_closed_and_peer_serves_on(peer, start_server, pki):
    srv = start_peer(start_server, peer, "echo", pki)
    for junk in (b"NICK alice\r\nUSER a 0 * :A\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                 random.Random(3).randbytes(600)):
        with socket.create_connection(tls_port(srv), timeout=WAIT) as s:
            s.sendall(junk)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:  # an alert perhaps, then the close
                try:
                    if not s.recv(65536):
                        break
                except ConnectionResetError:
                    break
            else:
                pytest.fail(f"{junk[:20]!r}: the connection stayed open")
    with tls_connect(tls_port(srv), pki) as s:
        echo_exact(s, b"after the junk\n")
    stop_clean(srv)


def test_unfinished_handshakes_block_no_one_and_end_at_10s(peer, start_server, pki):
    """Connections that never begin a handshake, or stop half-way through a
    ClientHello, hold up no other client; the peer closes them after its 10 s
    handshake bound (yard-serve's default --tls-handshake-timeout)."""
    srv = start_peer(start_server, peer, "echo", pki, plain=False)
    t0 = time.monotonic()
    stalled = [socket.create_connection(tls_port(srv), timeout=WAIT) for _ in range(20)]
    # A record header announcing 512 bytes of handshake, then nothing more.
    stalled[0].sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    with tls_connect(tls_port(srv), pki) as s:
        echo_exact(s, b"served beside them\n")
    for c in stalled:
        c.settimeout(max(0.1, t0 + 10 + WAIT - time.monotonic()))
        try:
            assert c.recv(4096) == b"", "data on a stalled handshake"
        except ConnectionResetError:
            pass
        except TimeoutError:
            pytest.fail(f"a stalled handshake still open {time.monotonic() - t0:.1f}s later")
        c.close()
    assert time.monotonic() - t0 >= 9.0, "closed before the 10 s bound"
    stop_clean(srv)


@pytest.mark.parametrize("app", ["echo", "counter", "sink", "rest", "broadcast"])
def test_sigterm_with_tls_connections_open(peer, start_server, pki, app, tmp_path):
    if app == "broadcast" and peer == "node-cluster":
        pytest.skip("the Node peer refuses --cluster with broadcast")
    flags = ["--out", str(tmp_path / "out")] if app == "sink" else []
    if app == "rest":
        flags = ["--bcrypt-cost", "4"]
    srv = start_peer(start_server, peer, app, pki, *flags)
    conns = [tls_connect(tls_port(srv), pki) for _ in range(3)]
    if app == "echo":
        echo_exact(conns[0], b"x")  # one with the app, the others just shaken hands
    stop_clean(srv)
    for s in conns:
        s.close()


def file_fingerprint(cert) -> str:
    """SHA-256 of the first certificate in a PEM file (the server's own)."""
    pem = cert.read_text()
    first = pem[:pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(first)).hexdigest()


def test_sighup_reloads_the_certificate(peer, start_server, pki, tmp_path):
    """As yard-serve (docs/tls.md): after SIGHUP new connections get the new certificate
    while one made before keeps its session and is served on; a file that does not load
    keeps the pair in use, with a line on stderr saying so. Six connections in a row
    present it, so every worker of a cluster has reloaded."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(pki.cert, cert)
    shutil.copy(pki.key, key)
    srv = start_server([*launcher(peer), "--app", "echo", "--tls-listen", "127.0.0.1:0",
                        "--tls-cert", cert, "--tls-key", key])
    addr = tls_port(srv)

    def presented() -> str:
        with tls_connect(addr, pki) as s:
            echo_exact(s, b"which certificate?\n")
            return fingerprint(s)

    first = file_fingerprint(pki.cert)
    assert presented() == first
    established = tls_connect(addr, pki)
    echo_exact(established, b"before the reload\n")
    # A second certificate from the same CA, with its own key, under the same names.
    second = make_pki(pki.ca.parent, name="second")
    new = file_fingerprint(second.cert)
    assert new != first
    shutil.copy(second.cert, cert)
    shutil.copy(second.key, key)
    assert presented() == first, "the files alone changed nothing"
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_for(lambda: all(presented() == new for _ in range(6)), timeout=WAIT,
             what="the new certificate on every new connection after SIGHUP")
    assert fingerprint(established) == first
    echo_exact(established, b"after the reload, on the old session\n")
    # A certificate that does not load: the pair in use stays, and stderr says why.
    cert.write_text("broken\n")
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_for(lambda: "keeping the certificate in use" in srv.stderr(), timeout=WAIT,
             what="the failed reload's line on stderr")
    assert all(presented() == new for _ in range(6))
    # A key that is not the certificate's: the same.
    shutil.copy(pki.cert, cert)
    shutil.copy(second.key, key)
    before = srv.stderr().count("keeping the certificate in use")
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_for(lambda: srv.stderr().count("keeping the certificate in use") > before,
             timeout=WAIT, what="the mismatched reload's line on stderr")
    assert all(presented() == new for _ in range(6))
    echo_exact(established, b"still served\n")
    established.close()
    assert srv.proc.poll() is None
    stop_clean(srv)


# ---- usage and file errors ---------------------------------------------------

def test_usage_errors_exit_2(peer, pki):
    cases = [
        (["--tls-listen", "127.0.0.1:0"], "--tls-listen"),
        (["--tls-listen", "127.0.0.1:0", "--tls-cert", pki.cert], "--tls-listen"),
        (["--tls-listen", "127.0.0.1:0", "--tls-key", pki.key], "--tls-listen"),
        (["--listen", "127.0.0.1:0", "--tls-cert", pki.cert, "--tls-key", pki.key], "--tls-listen"),
        (["--listen", "127.0.0.1:0", "--tls-key", pki.key], "--tls-listen"),
        (["--tls-listen", "127.0.0.1:99999", "--tls-cert", pki.cert, "--tls-key", pki.key],
         "--tls-listen"),
        ([], "--listen"),
    ]
    for args, named in cases:
        r = run_peer(peer, "--app", "echo", *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert named in r.stderr, (args, r.stderr)
        assert "listening" not in r.stdout, (args, r.stdout)


def test_file_errors_exit_1_naming_the_file(peer, pki, tmp_path):
    other = make_pki(tmp_path / "other")  # a key of another certificate
    missing = tmp_path / "no-such.pem"
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a PEM file\n")
    cases = [
        (missing, pki.key, missing),
        (pki.cert, missing, missing),
        (garbage, pki.key, garbage),
        (pki.key, pki.key, pki.key),    # a key where the certificate goes
        (pki.cert, garbage, garbage),
        (pki.cert, pki.cert, pki.cert),  # a certificate where the key goes
        (pki.cert, other.key, other.key),
    ]
    for n, (cert, key, named) in enumerate(cases):
        # rest opens its listeners by another road in some peers: check it too.
        for app in ("echo", "rest") if n in (0, len(cases) - 1) else ("echo",):
            r = run_peer(peer, "--app", app, "--listen", "127.0.0.1:0", "--tls-listen",
                         "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
            assert r.returncode == 1, (cert, key, app, r.returncode, r.stderr)
            assert str(named) in r.stderr, (cert, key, app, r.stderr)
            assert "listening" not in r.stdout, (cert, key, app, r.stdout)


def test_rust_monoio_refuses_tls():
    """TLS is the tokio runtime's (docs/peers.md): monoio with --tls-listen is a usage
    error naming the runtime, before anything listens."""
    r = run_peer("rust-tokio", "--runtime", "monoio", "--app", "echo", "--tls-listen",
                 "127.0.0.1:0", "--tls-cert", "c.pem", "--tls-key", "k.pem")
    assert r.returncode == 2 and "--runtime tokio" in r.stderr, r.stderr
    assert "listening" not in r.stdout


# ---- yard-load against each peer's echo --------------------------------------

def test_yard_load_tls_echo_against_peer(peer, start_server, pki):
    if not (BIN / "yard-load").exists():
        pytest.skip("build/bin/yard-load is not built (make build)")
    srv = start_peer(start_server, peer, "echo", pki)
    target = "127.0.0.1:%d" % tls_port(srv)[1]
    r = subprocess.run([str(BIN / "yard-load"), "echo", "--target", target, "--tls", "--tls-ca",
                        str(pki.ca), "--connections", "10", "--messages", "200", "--size", "100",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["messages"] == 10 * 200 and doc["errors"] == 0, doc
    assert doc["bytes_sent"] == doc["bytes_received"] == 10 * 200 * 100
    t = doc["tls"]
    assert t["full_handshakes"] + t["resumed_handshakes"] == 10 and t["failures"] == 0, t
    stop_clean(srv)
