"""TLS in the connection driver (docs/tls.md), under every model: byte-exact echo
and exact counts over TLS beside a plain listener, a TLS-only server, the start-up
errors, SIGHUP's reload, and bad input (plain text, random bytes, a handshake that
stops, TLS 1.0, a crowd of unfinished handshakes), each closed cleanly."""

import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import warnings

import pytest

from conftest import BIN, ROOT, model_args, recv_exactly, skip_unavailable, wait_for
from tlslib import client_context, fingerprint, make_pki, tls_args, tls_connect

SIZES = [1, 1000, 16_385, 70_000, 1 << 20]
CHUNK = 64 * 1024
WAIT = 15.0


def start(start_server, app, model, pki, *flags, plain=True):
    skip_unavailable(model)
    listen = ["--listen", "127.0.0.1:0"] if plain else []
    return start_server([BIN / "yard-serve", "--app", app, *model_args(model), *listen,
                         *tls_args(pki), *flags])


def echo_exact(sock, data: bytes) -> None:
    """Sends data in pieces and reads each one's echo before the next, so
    that neither side's buffers fill (an SSL socket is one thread's)."""
    for off in range(0, len(data), CHUNK):
        piece = data[off:off + CHUNK]
        sock.sendall(piece)
        assert recv_exactly(sock, len(piece)) == piece, f"echo differs at offset {off}"


def closed_by_server(sock, timeout: float = WAIT) -> bytes:
    """Everything the server sent until it closed (an alert, perhaps); fails
    if it keeps the connection open past timeout."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            b = sock.recv(65536)
        except ConnectionResetError:
            return got
        except socket.timeout:
            break
        if not b:
            return got
        got += b
    raise AssertionError(f"the server kept the connection open for {timeout} s (sent {got[:60]!r})")


@pytest.mark.models()
def test_echo_over_tls_is_byte_exact_beside_plain(start_server, pki, model):
    srv = start(start_server, "echo", model, pki)
    assert len(srv.addrs) == 1 and len(srv.tls_addrs) == 1, (srv.addrs, srv.tls_addrs)
    assert srv.addrs[0][1] != srv.tls_addrs[0][1]
    with tls_connect(srv.tls_addrs[0], pki) as s:
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        for n in SIZES:
            echo_exact(s, os.urandom(n))
    with socket.create_connection(srv.addrs[0], timeout=WAIT) as p:
        echo_exact(p, b"plain beside TLS")


@pytest.mark.models("loop")
def test_echo_over_tls_with_handshakes_on_the_loop(start_server, pki, model):
    """--tls-handshake inline: the loop models' other design (the default
    puts each handshake's private-key work on the offload pool)."""
    srv = start(start_server, "echo", model, pki, "--tls-handshake", "inline")
    for _ in range(3):
        with tls_connect(srv.tls_addrs[0], pki) as s:
            echo_exact(s, os.urandom(70_000))


@pytest.mark.models()
def test_counter_over_tls_counts_exactly(start_server, pki, model):
    srv = start(start_server, "counter", model, pki, plain=False)
    assert srv.addrs == [] and len(srv.tls_addrs) == 1
    clients, per_client, batch = 4, 2000, 100
    failures = []

    def client():
        try:
            with tls_connect(srv.tls_addrs[0], pki, timeout=60) as s:
                last = 0
                for _ in range(per_client // batch):
                    s.sendall(b"\x01" * batch)
                    vals = [v for (v,) in struct.iter_unpack(">Q", recv_exactly(s, 8 * batch))]
                    assert vals[0] > last and vals == sorted(vals), vals[:3]
                    last = vals[-1]
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    with tls_connect(srv.tls_addrs[0], pki) as s:
        s.sendall(b"\x00")
        assert struct.unpack(">Q", recv_exactly(s, 8))[0] == clients * per_client


def test_tls_only_listening_line(start_server, pki):
    srv = start(start_server, "echo", "epoll", pki, plain=False)
    line_addrs = srv.tls_addrs
    assert srv.addrs == [] and len(line_addrs) == 1
    with socket.create_connection(line_addrs[0], timeout=WAIT) as s:
        s.sendall(b"NICK plain\r\n")
        closed_by_server(s)


def run_serve(*args, timeout=15):
    return subprocess.run([str(BIN / "yard-serve"), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_start_up_errors_name_the_file(tmp_path, pki):
    base = ["--app", "echo", "--model", "epoll", "--listen", "127.0.0.1:0"]
    missing = tmp_path / "nowhere.pem"
    r = run_serve(*base, "--tls-listen", "127.0.0.1:0", "--tls-cert", missing, "--tls-key",
                  pki.key)
    assert r.returncode == 1 and str(missing) in r.stderr and "No such file" in r.stderr, r.stderr
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    r = run_serve(*base, "--tls-listen", "127.0.0.1:0", "--tls-cert", garbage, "--tls-key",
                  pki.key)
    assert r.returncode == 1 and f"--tls-cert {garbage}:" in r.stderr, r.stderr
    other = make_pki(tmp_path / "other")
    r = run_serve(*base, "--tls-listen", "127.0.0.1:0", "--tls-cert", pki.cert, "--tls-key",
                  other.key)
    assert r.returncode == 1 and "is not the key of --tls-cert" in r.stderr, r.stderr
    # Usage errors: exit 2 and no listener.
    r = run_serve(*base, "--tls-cert", pki.cert, "--tls-key", pki.key)
    assert r.returncode == 2 and "add --tls-listen" in r.stderr, r.stderr
    r = run_serve(*base, "--tls-handshake", "inline")
    assert r.returncode == 2 and "add --tls-listen" in r.stderr, r.stderr
    r = run_serve(*base, "--tls-listen", "127.0.0.1:0", "--tls-cert", pki.cert)
    assert r.returncode == 2 and "needs --tls-cert FILE and --tls-key FILE" in r.stderr, r.stderr
    r = run_serve("--app", "chat", "--model", "fork", "--pair", "--data", tmp_path / "data",
                  "--listen", "127.0.0.1:0", *tls_args(pki))
    assert r.returncode == 2 and "--pair cannot carry TLS" in r.stderr, r.stderr


@pytest.mark.models()
def test_sighup_reloads_the_certificate(start_server, pki, tmp_path, model):
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "cert.pem", live / "key.pem"
    shutil.copy(pki.cert, cert)
    shutil.copy(pki.key, key)
    skip_unavailable(model)
    srv = start_server([BIN / "yard-serve", "--app", "echo", *model_args(model), "--tls-listen",
                        "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key])
    addr = srv.tls_addrs[0]
    with tls_connect(addr, pki) as s:
        first = fingerprint(s)
    # A second certificate from the same CA, swapped in under the same names.
    second = make_pki(pki.ca.parent, name="second")
    shutil.copy(second.cert, cert)
    shutil.copy(second.key, key)
    with tls_connect(addr, pki) as s:
        assert fingerprint(s) == first, "the files alone changed nothing"
    os.kill(srv.proc.pid, signal.SIGHUP)

    def presented():
        with tls_connect(addr, pki) as s:
            echo_exact(s, b"after the reload")
            return fingerprint(s)

    wait_for(lambda: presented() != first, timeout=WAIT, what="the new certificate after SIGHUP")
    new = presented()
    # A file that does not load keeps the pair in use, and says why.
    cert.write_text("broken\n")
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_for(lambda: "keeping the certificate in use" in srv.stderr(), timeout=WAIT,
             what="the failed reload's log line")
    assert presented() == new
    assert srv.proc.poll() is None


def client_hello() -> bytes:
    """The first flight of a real client: a ClientHello, for a handshake
    that is then left unfinished."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


TLS_CLOSE_LINE = re.compile(r"warning: (127\.0\.0\.1:\d+): connection closed: TLS: \S")


@pytest.mark.models()
def test_bad_input_is_closed_cleanly_and_logged(start_server, pki, model):
    srv = start(start_server, "echo", model, pki, "--tls-handshake-timeout", "400ms")
    addr = srv.tls_addrs[0]
    for junk in (b"NICK plain\r\nUSER a 0 * :b\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                 bytes(random.Random(7).getrandbits(8) for _ in range(600))):
        with socket.create_connection(addr, timeout=WAIT) as s:
            s.sendall(junk)
            got = closed_by_server(s)
            assert junk[:8] not in got, "a TLS port answered in plain text"
    # A handshake that stops half-way, and one that never starts: closed at
    # the timeout, not before.
    hello = client_hello()
    for sent in (hello[:len(hello) // 2], b""):
        with socket.create_connection(addr, timeout=WAIT) as s:
            t0 = time.monotonic()
            s.sendall(sent)
            closed_by_server(s, timeout=WAIT)
            assert time.monotonic() - t0 >= 0.3
    # TLS 1.0 is refused by the server (the client allows it, weak ciphers too).
    with warnings.catch_warnings():  # the point: a client that still offers it
        warnings.simplefilter("ignore", DeprecationWarning)
        old = client_context(pki, minimum_version=ssl.TLSVersion.TLSv1,
                             maximum_version=ssl.TLSVersion.TLSv1)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises(ssl.SSLError) as e:
        tls_connect(addr, pki, ctx=old).close()
    assert "PROTOCOL_VERSION" in str(e.value).upper() or "UNSUPPORTED" in str(e.value).upper(), e.value
    # Each of those was logged, naming the peer (the log is rate-limited).
    wait_for(lambda: TLS_CLOSE_LINE.search(srv.stderr()), timeout=WAIT,
             what="a log line naming a peer and the TLS error")
    # And the server still serves, in TLS and in plain text.
    with tls_connect(addr, pki) as s:
        echo_exact(s, b"still here")
    with socket.create_connection(srv.addrs[0], timeout=WAIT) as p:
        echo_exact(p, b"still here")


@pytest.mark.models()
def test_unfinished_handshakes_do_not_stop_service(start_server, pki, model):
    """300 connections that send half a ClientHello and stop: a client
    beside them is served, and every one of them is closed at the timeout."""
    srv = start(start_server, "echo", model, pki, "--tls-handshake-timeout", "1s", plain=False)
    addr = srv.tls_addrs[0]
    half = client_hello()[:40]
    stalled = []
    try:
        for _ in range(300):
            s = socket.create_connection(addr, timeout=WAIT)
            s.sendall(half)
            stalled.append(s)
        with tls_connect(addr, pki) as s:
            echo_exact(s, b"served beside 300 stalled handshakes")
        for s in stalled:
            closed_by_server(s, timeout=WAIT)
    finally:
        for s in stalled:
            s.close()


@pytest.mark.models()
def test_rest_over_https_with_curl(start_server, pki, model):
    """The REST app as a browser or curl meets it: HTTPS, the certificate
    checked against the test CA, keep-alive across requests."""
    require_curl()
    srv = start(start_server, "rest", model, pki, "--bcrypt-cost", "4")
    base = f"https://localhost:{srv.tls_addrs[0][1]}"
    body = '{"name": "Ада", "emoji": "🔐"}'
    r = subprocess.run(["curl", "-sS", "--fail-with-body", "--cacert", str(pki.ca),
                        "-X", "POST", "-d", body, f"{base}/user/set/ada", "--next",
                        "--cacert", str(pki.ca), f"{base}/user/get/ada", "--next",
                        "--cacert", str(pki.ca), "-X", "POST", "-d", '{"password": "s3cret"}',
                        f"{base}/password/set/ada"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "OK" + body + "OK", r.stdout
    # Without the CA, curl refuses the server: the certificate is what is checked.
    r = subprocess.run(["curl", "-sS", f"{base}/user/get/ada"], capture_output=True, timeout=30)
    assert r.returncode == 60, r.stderr  # CURLE_PEER_FAILED_VERIFICATION


def require_curl() -> None:
    if not shutil.which("curl"):
        pytest.fail("not installed: curl (make deps installs it)", pytrace=False)


def yard_load(*args, timeout=60):
    return subprocess.run([str(BIN / "yard-load"), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.models(names=["epoll", "uring", "thread"])
def test_yard_load_over_tls_counts_handshakes_and_round_trips(start_server, pki, model):
    srv = start(start_server, "echo", model, pki)
    target = "127.0.0.1:%d" % srv.tls_addrs[0][1]
    r = yard_load("echo", "--target", target, "--tls", "--tls-ca", pki.ca, "--connections", 20,
                  "--messages", 300, "--size", 100, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["messages"] == 20 * 300 and doc["errors"] == 0
    assert doc["bytes_sent"] == doc["bytes_received"] == 20 * 300 * 100
    t = doc["tls"]
    assert t["full_handshakes"] == 20 and t["resumed_handshakes"] == 0 and t["failures"] == 0
    assert 0 < t["handshake_us"]["p50"] <= t["handshake_us"]["max"]
    # tls:HOST:PORT, as the server's first line writes it, is the same as --tls; a CA
    # given for a plain target changes nothing.
    r = yard_load("echo", "--target", "tls:" + target, "--tls-ca", pki.ca, "--messages", 5,
                  "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tls"]["full_handshakes"] == 1, r.stderr
    plain = json.loads(yard_load("echo", "--target", "127.0.0.1:%d" % srv.port, "--messages", 5,
                                 "--tls-ca", pki.ca, "--json").stdout)
    assert plain["tls"] is None and plain["errors"] == 0
    # A server the system's CAs do not vouch for, and a port without TLS: exit 1, and why.
    r = yard_load("echo", "--target", target, "--tls", "--messages", 5)
    assert r.returncode == 1 and "certificate verify failed" in r.stderr, r.stderr
    r = yard_load("echo", "--target", "127.0.0.1:%d" % srv.port, "--tls", "--tls-insecure",
                  "--messages", 5)
    assert r.returncode == 1 and "TLS" in r.stderr, r.stderr


@pytest.mark.parametrize("burst", ["off", "on"])
def test_tls_burst_load_step_reports_the_echo_and_the_burst(start_server, pki, burst):
    """bench/tls_burst.py as experiments/tls_burst.toml's load step: the echo's yard-load
    JSON, every message answered, and the handshakes of the burst (none without it)."""
    srv = start(start_server, "echo", "epoll", pki)
    target = "tls:127.0.0.1:%d" % srv.tls_addrs[0][1]
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "tls_burst.py"), "--target", target,
                        "--tls-ca", str(pki.ca), "--bin", str(BIN), "--burst", burst,
                        "--connections", "5", "--rate", "200", "--seconds", "1.5",
                        "--handshake-rate", "60"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["errors"] == 0 and doc["messages"] > 0
    assert 0 < doc["latency_us"]["p50"] <= doc["latency_us"]["p99"]
    m = doc["metrics"]
    assert m["burst_failures"] == 0
    if burst == "on":
        # 60 a second for a third of 1.5 s: about 30, open loop.
        assert 15 <= m["burst_handshakes"] <= 45, m
    else:
        assert m["burst_handshakes"] == 0 and m["burst_handshakes_per_s"] == 0


def test_yard_load_tls_usage_errors(pki):
    for args in (["counter", "--tls", "--io", "uring"], ["echo", "--tls", "--io", "uring"],
                 ["echo", "--tls", "--tls-ca", pki.ca, "--tls-insecure"]):
        r = yard_load(*args, "--target", "127.0.0.1:9")
        assert r.returncode == 2 and "tls" in r.stderr.lower(), (args, r.stderr)


@pytest.mark.models(names=["epoll", "fork", "coro"])
def test_yard_load_handshake_mode_counts_full_and_resumed(start_server, pki, model):
    srv = start(start_server, "echo", model, pki)
    target = "127.0.0.1:%d" % srv.tls_addrs[0][1]
    full = json.loads(yard_load("handshake", "--target", target, "--tls", "--tls-ca", pki.ca,
                                "--connections", 2, "--messages", 15, "--size", 40, "--json").stdout)
    assert full["messages"] == 30 and full["errors"] == 0, full["first_error"]
    assert full["tls"]["full_handshakes"] == 30 and full["tls"]["resumed_handshakes"] == 0
    assert full["bytes_sent"] == full["bytes_received"] == 30 * 40
    resumed = json.loads(yard_load("handshake", "--target", target, "--tls", "--tls-ca", pki.ca,
                                   "--tls-resume", "on", "--connections", 2, "--messages", 15,
                                   "--json").stdout)
    t = resumed["tls"]
    assert resumed["messages"] == 30 and t["full_handshakes"] + t["resumed_handshakes"] == 30
    # The first rounds (one per slot at most) have no session yet; the rest resume one.
    assert t["full_handshakes"] <= 2 and t["resumed_handshakes"] >= 28, t
    plain = json.loads(yard_load("handshake", "--target", "127.0.0.1:%d" % srv.port,
                                 "--connections", 2, "--messages", 10, "--json").stdout)
    assert plain["messages"] == 20 and plain["errors"] == 0 and plain["tls"] is None
    opened = json.loads(yard_load("handshake", "--target", target, "--tls", "--tls-ca", pki.ca,
                                  "--rate", 50, "--connections", 16, "--duration", "1s",
                                  "--json").stdout)
    assert opened["loop"] == "open" and opened["target_rate"] == 50 and opened["messages"] > 0
    assert opened["errors"] == 0 and opened["tls"]["full_handshakes"] == opened["messages"]
    r = yard_load("handshake", "--target", target, "--tls-resume", "on", "--messages", 1)
    assert r.returncode == 2 and "--tls-resume goes with --tls" in r.stderr, r.stderr


@pytest.mark.models(names=["fork", "thread", "coro"])
def test_stop_is_prompt_with_a_tls_peer_that_does_not_read(start_server, pki, model):
    """A TLS connection loses only its read side at first when the server stops (so
    that it can seal a farewell); one whose thread is blocked sending to a peer that
    does not read loses the rest soon after: the server still exits 0 in time."""
    srv = start(start_server, "echo", model, pki)
    s = tls_connect(srv.tls_addrs[0], pki)
    s.setblocking(False)
    sent, deadline = 0, time.monotonic() + 10
    blob = b"x" * 65536
    while time.monotonic() < deadline:  # until both directions' buffers are full
        try:
            sent += s.send(blob)
        except (ssl.SSLWantWriteError, BlockingIOError):
            if sent > (4 << 20) or time.monotonic() > deadline - 8:
                break
            time.sleep(0.01)
    assert sent > (1 << 20), sent
    t0 = time.monotonic()
    assert srv.stop(signal.SIGTERM, timeout=5) == 0, srv.stderr()
    assert time.monotonic() - t0 < 4
    s.close()


@pytest.mark.models(names=["epoll", "thread"])
def test_one_byte_that_starts_no_record_is_refused_at_once(start_server, pki, model):
    """Until the handshake ends the driver gives OpenSSL whole records only; a byte that
    cannot start one (not a record type) goes to OpenSSL at once, which refuses it: the
    close names the TLS error, not the handshake timeout (an hour here)."""
    srv = start(start_server, "echo", model, pki, "--tls-handshake-timeout", "1h")
    with socket.create_connection(srv.tls_addrs[0], timeout=WAIT) as s:
        s.sendall(b"N")
        closed_by_server(s)
        port = s.getsockname()[1]
    wait_for(lambda: re.search(rf"127\.0\.0\.1:{port}: connection closed: TLS: ", srv.stderr()),
             timeout=WAIT, what="the TLS error's log line for that client")
