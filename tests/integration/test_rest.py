"""The rest app over HTTP/1.1 under every model: every route and status
code (through curl and through raw sockets), pipelining, malformed input,
the request read timeout (408), concurrent long polls, and stores shared
between connections (and processes, under fork and reactors --procs)."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import threading
import time

import pytest

from conftest import wait_for

FLAGS = ("--bcrypt-cost", "4", "--longpoll-ms", "300")


def curl(srv, method: str, path: str, body: str | None = None, *extra: str):
    """(status, body, headers) of one request made by curl."""
    argv = ["curl", "-sS", "-m", "10", "-X", method, "-D", "-",
            f"http://{srv.host}:{srv.port}{path}", *extra]
    if body is not None:
        argv += ["--data-binary", body]
    out = subprocess.run(argv, capture_output=True, check=True, timeout=15).stdout
    head, _, payload = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return status, payload, headers


def read_response(sock: socket.socket, buf: bytearray) -> tuple[int, dict, bytes]:
    """One response from sock (buf carries bytes read past the previous one)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed mid-response: {bytes(buf)!r}")
        buf += chunk
    head, _, _ = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    need = len(head) + 4 + int(headers["content-length"])
    while len(buf) < need:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed mid-body")
        buf += chunk
    body = bytes(buf[len(head) + 4:need])
    del buf[:need]
    return int(lines[0].split()[1]), headers, body


def exchange(srv, raw: bytes, count: int = 1, timeout: float = 10.0):
    with srv.connect(timeout) as s:
        s.sendall(raw)
        buf = bytearray()
        return [read_response(s, buf) for _ in range(count)]


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except (ConnectionResetError, socket.timeout):
        return False


def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def get(path: str, extra: bytes = b"") -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n"


@pytest.mark.models()
def test_routes_with_curl(serve, model):
    srv = serve("rest", model, *FLAGS)
    st, body, h = curl(srv, "GET", "/")
    assert st == 200 and "date" in h and h["content-type"] == "text/plain"
    pw = json.dumps({"password": "s3cret"})
    assert curl(srv, "POST", "/password/set/alice", pw)[:2] == (200, b"OK")
    assert curl(srv, "POST", "/password/verify/alice", pw)[:2] == (200, b"OK")
    assert curl(srv, "POST", "/password/verify/alice", '{"password": "nope"}')[0] == 403
    assert curl(srv, "POST", "/password/verify/nobody", pw)[:2] == (400, b"Password not found")
    assert curl(srv, "POST", "/password/set/alice", '{"pass": 1}')[0] == 400
    assert curl(srv, "POST", "/password/set/alice", "not json")[0] == 400
    info = '{"name": "Alice", "age": 30}'
    assert curl(srv, "POST", "/user/set/alice", info)[:2] == (200, b"OK")
    st, body, h = curl(srv, "GET", "/user/get/alice")
    assert (st, body, h["content-type"]) == (200, info.encode(), "application/json")
    assert curl(srv, "GET", "/user/get/bob")[:2] == (400, b"User not found.")
    assert curl(srv, "POST", "/user/set/bob", "[1, 2]")[0] == 400
    assert curl(srv, "POST", "/user/set/bob", "{oops")[0] == 400
    assert curl(srv, "GET", "/nowhere")[0] == 404
    st, _, h = curl(srv, "GET", "/user/set/alice")
    assert st == 405 and h["allow"] == "POST"
    st, _, h = curl(srv, "POST", "/user/get/alice", "{}")
    assert st == 405 and h["allow"] == "GET"
    # curl's chunked upload decodes to the same body.
    st, body, _ = curl(srv, "POST", "/password/verify/alice", pw, "-H",
                       "Transfer-Encoding: chunked")
    assert (st, body) == (200, b"OK")


@pytest.mark.models()
def test_pipelined_in_order(serve, model):
    srv = serve("rest", model, *FLAGS)
    raw = (post("/user/set/p", b'{"v": 1}') + get("/user/get/p")
           + post("/password/set/p", b'{"password": "x"}') + get("/longPoll")
           + get("/user/get/none", b"Connection: close\r\n"))
    with srv.connect() as s:
        s.sendall(raw)
        buf = bytearray()
        got = [read_response(s, buf) for _ in range(5)]
        assert closed_by_peer(s)
    assert [(r[0], r[2]) for r in got] == [(200, b"OK"), (200, b'{"v": 1}'), (200, b"OK"),
                                           (200, b"OK"), (400, b"User not found.")]
    assert got[4][1]["connection"] == "close"


@pytest.mark.models()
def test_http10_and_connection_close(serve, model):
    srv = serve("rest", model, *FLAGS)
    for raw in (b"GET / HTTP/1.0\r\n\r\n", get("/", b"Connection: close\r\n")):
        with srv.connect() as s:
            s.sendall(raw)
            st, h, body = read_response(s, bytearray())
            assert (st, body) == (200, b"OK")
            assert closed_by_peer(s)
    with srv.connect() as s:  # 1.0 with keep-alive stays open
        ka = b"Connection: keep-alive\r\n"
        s.sendall(b"GET / HTTP/1.0\r\n" + ka + b"\r\n"
                  + b"POST /password/set/k HTTP/1.0\r\n" + ka
                  + b"Content-Length: 17\r\n\r\n{\"password\": \"x\"}"
                  + b"GET /longPoll HTTP/1.0\r\n" + ka + b"\r\n")
        buf = bytearray()
        got = [read_response(s, buf) for _ in range(3)]
        assert [(r[0], r[1]["connection"], r[2]) for r in got] == [(200, "keep-alive", b"OK")] * 3


@pytest.mark.models()
def test_errors_close_and_server_survives(serve, model):
    srv = serve("rest", model, *FLAGS)
    cases = [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/1.1\nHost: a\n\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST /user/set/a HTTP/1.1\r\nHost: a\r\nContent-Length: 70000\r\n\r\n", 413),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 9000 + b"\r\n\r\n", 431),
        (b"\x00\x01\x02\xff" * 10, 400),
    ]
    for raw, want in cases:
        with srv.connect() as s:
            s.sendall(raw)
            st, h, _ = read_response(s, bytearray())
            assert st == want, raw[:40]
            assert h["connection"] == "close"
            assert closed_by_peer(s)
    # A peer leaving mid-request is not an error either.
    with srv.connect() as s:
        s.sendall(b"POST /user/set/a HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n{")
    assert exchange(srv, get("/"))[0][0] == 200


@pytest.mark.models()
def test_slowloris_gets_408(serve, model):
    srv = serve("rest", model, *FLAGS, "--request-timeout-ms", "400")
    with srv.connect() as s:
        t0 = time.monotonic()
        s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n")
        st, h, _ = read_response(s, bytearray())
        assert st == 408 and h["connection"] == "close"
        assert time.monotonic() - t0 >= 0.35
        assert closed_by_peer(s)
    assert exchange(srv, get("/"))[0][0] == 200


@pytest.mark.models()
def test_longpoll_waits(serve, model):
    srv = serve("rest", model, *FLAGS)
    t0 = time.monotonic()
    st, _, body = exchange(srv, get("/longPoll"))[0]
    assert (st, body) == (200, b"OK")
    assert time.monotonic() - t0 >= 0.29


def test_concurrent_longpolls_do_not_block_the_loop(serve):
    """20 long polls of 0.5 s at once under epoll: one loop thread answers
    them all about together (a blocked loop would take 20 x 0.5 s)."""
    srv = serve("rest", "epoll", "--longpoll-ms", "500", "--bcrypt-cost", "4")
    results: list[int] = []
    lock = threading.Lock()

    def one():
        st = exchange(srv, get("/longPoll"), timeout=15)[0][0]
        with lock:
            results.append(st)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    elapsed = time.monotonic() - t0
    assert results == [200] * 20
    assert elapsed < 5.0, f"20 long polls took {elapsed:.2f}s"


@pytest.mark.models()
def test_stores_shared_between_connections(serve, model):
    srv = serve("rest", model, *FLAGS)
    # Many connections, so that fork children and reactor processes differ.
    for i in range(8):
        assert exchange(srv, post(f"/user/set/u{i}", b'{"i": %d}' % i))[0][0] == 200
        assert exchange(srv, post(f"/password/set/u{i}", b'{"password": "p%d"}' % i))[0][0] == 200
    for i in range(8):
        st, _, body = exchange(srv, get(f"/user/get/u{i}"))[0]
        assert (st, body) == (200, b'{"i": %d}' % i)
        st, _, body = exchange(srv, post(f"/password/verify/u{i}",
                                         b'{"password": "p%d"}' % i))[0]
        assert (st, body) == (200, b"OK")


@pytest.mark.models(names=["epoll", "thread"])
def test_store_full_is_507(serve, model):
    srv = serve("rest", model, *FLAGS, "--store-entries", "16")
    codes = [exchange(srv, post(f"/user/set/f{i}", b"{}"))[0][0] for i in range(18)]
    assert codes == [200] * 16 + [507] * 2
    assert exchange(srv, post("/user/set/f0", b'{"again": 1}'))[0][0] == 200  # update in place


@pytest.mark.models(names=["epoll"])
def test_expect_continue(serve, model):
    srv = serve("rest", model, *FLAGS)
    with srv.connect() as s:
        s.sendall(b"POST /user/set/e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 2\r\n\r\n")
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
        assert bytes(buf).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        del buf[:25]
        s.sendall(b"{}")
        assert read_response(s, buf)[0] == 200


def test_bad_request_timeout_is_refused(tmp_path):
    from conftest import BIN
    p = subprocess.run([BIN / "yard-serve", "--app", "rest", "--model", "epoll", "--listen",
                        "127.0.0.1:0", "--request-timeout-ms", "soon"],
                       capture_output=True, timeout=10)
    assert p.returncode == 2
    assert b"--request-timeout-ms: expected a whole number" in p.stderr


@pytest.mark.models()
def test_longpoll_not_late_after_idle(serve, model):
    """A long poll armed after the server sat idle answers on time: the loop
    must not measure the timer against a clock reading from before the idle
    period (a 0.3 s poll once took 0.3 s + the idle time)."""
    srv = serve("rest", model, *FLAGS)
    time.sleep(1.5)  # deliberately idle: no condition to wait for
    t0 = time.monotonic()
    st, _, body = exchange(srv, get("/longPoll"))[0]
    elapsed = time.monotonic() - t0
    assert (st, body) == (200, b"OK")
    assert 0.29 <= elapsed < 1.5, f"0.3 s long poll answered after {elapsed:.2f}s"


# --- silent connections: the rest app's idle timeout ---------------------------

def idle_log_line(srv) -> str:
    """The start-up line that states the effective idle timeout (--log-level info)."""
    return wait_for(lambda: next((ln for ln in srv.stderr().splitlines()
                                  if " info: idle timeout " in ln), None),
                    what="the idle timeout start-up line")


@pytest.mark.models()
def test_idle_timeout_closes_silent_keeps_active(serve, model):
    """A connection that says nothing is closed once it has been silent for
    --idle-timeout; one that keeps sending requests on the same keep-alive
    connection, each well within the timeout, is served throughout."""
    srv = serve("rest", model, *FLAGS, "--idle-timeout", "1s", "--log-level", "info")
    silent = srv.connect()
    active = srv.connect()
    t0 = time.monotonic()
    buf = bytearray()
    served = 0
    closed_at = None
    # Each round waits up to 0.25 s (the active client's pause between
    # requests, well under the timeout) for the silent one's close, then the
    # active one makes a request. The active connection must outlive the
    # silent one by more than a full timeout; 40 rounds bound it to ~10 s.
    for _ in range(40):
        if closed_at is None:
            if select.select([silent], [], [], 0.25)[0]:
                assert silent.recv(10) == b""  # closed by the server, no answer owed
                closed_at = time.monotonic() - t0
        else:
            time.sleep(0.25)  # pacing, not waiting for anything
        active.sendall(get("/"))
        st, h, body = read_response(active, buf)
        assert (st, body) == (200, b"OK") and h.get("connection") != "close"
        served += 1
        if closed_at is not None and time.monotonic() - t0 > closed_at + 1.2:
            break
    assert closed_at is not None, "the silent connection was never closed"
    assert closed_at >= 0.9, f"closed after {closed_at:.2f}s, before the 1 s timeout"
    assert closed_at < 5.0, f"closed only after {closed_at:.2f}s"
    assert served >= 8
    silent.close()
    active.close()
    wait_for(lambda: any("idle timeout" in ln and "(from --idle-timeout)" not in ln
                         for ln in srv.stderr().splitlines()), what="the close is logged")


@pytest.mark.models()
def test_idle_timeout_default_is_60s(serve, model):
    """Without --idle-timeout the rest app's own default applies; the
    start-up line says how long and where it came from (waiting 60 s for
    the close itself would prove no more than the 1 s test above)."""
    srv = serve("rest", model, *FLAGS, "--log-level", "info")
    line = idle_log_line(srv)
    assert "idle timeout 60s (the default of --app rest" in line, line
    assert exchange(srv, get("/"))[0][0] == 200


def test_idle_timeout_flag_replaces_the_default(serve):
    srv = serve("rest", "epoll", *FLAGS, "--idle-timeout", "90s", "--log-level", "info")
    assert "idle timeout 90s (from --idle-timeout)" in idle_log_line(srv)


@pytest.mark.models(names=["epoll", "fork"])
def test_idle_timeout_0_turns_the_default_off(serve, model):
    srv = serve("rest", model, *FLAGS, "--idle-timeout", "0", "--log-level", "info")
    assert "idle timeout off (--idle-timeout 0)" in idle_log_line(srv)
    with srv.connect() as s:  # and the server still serves
        s.sendall(get("/"))
        assert read_response(s, bytearray())[0] == 200


# --- bcrypt's 72-byte limit -------------------------------------------------------

def pw_body(pw: str) -> bytes:
    return json.dumps({"password": pw}).encode()  # non-ASCII goes as \\u escapes


TOO_LONG = b"Password longer than 72 bytes (bcrypt uses only the first 72)"


@pytest.mark.models()
def test_password_over_72_bytes_is_refused(serve, model):
    """bcrypt reads 72 bytes of a password at most, so a longer one would
    verify by its prefix: set and verify refuse it (400, connection kept),
    and every byte of a 72-byte password counts."""
    srv = serve("rest", model, *FLAGS)
    p72 = "a" * 72
    with srv.connect() as s:
        buf = bytearray()

        def ask(raw: bytes):
            s.sendall(raw)
            st, h, body = read_response(s, buf)
            return st, body, h

        assert ask(post("/password/set/long", pw_body(p72)))[:2] == (200, b"OK")
        assert ask(post("/password/verify/long", pw_body(p72)))[:2] == (200, b"OK")
        assert ask(post("/password/verify/long", pw_body("a" * 71 + "b")))[0] == 403
        # 73 bytes sharing the stored 72: bcrypt alone would say 200.
        st, body, h = ask(post("/password/verify/long", pw_body(p72 + "X")))
        assert (st, body) == (400, TOO_LONG)
        assert h["content-type"] == "text/plain" and h.get("connection") != "close"
        st, body, _ = ask(post("/password/set/other", pw_body("b" * 73)))
        assert (st, body) == (400, TOO_LONG)
        assert ask(post("/password/verify/other", pw_body("b" * 72)))[:2] == \
            (400, b"Password not found")  # nothing was stored
        # The same answer for an unknown user, and for a very long password.
        assert ask(post("/password/verify/nobody", pw_body("c" * 73)))[:2] == (400, TOO_LONG)
        assert ask(post("/password/set/huge", pw_body("d" * 5000)))[:2] == (400, TOO_LONG)
        # Bytes, not characters: é is two bytes in UTF-8.
        assert ask(post("/password/set/utf8", pw_body("é" * 36)))[:2] == (200, b"OK")
        assert ask(post("/password/verify/utf8", pw_body("é" * 36)))[:2] == (200, b"OK")
        assert ask(post("/password/set/utf8", pw_body("é" * 37)))[:2] == (400, TOO_LONG)
        assert ask(get("/"))[:2] == (200, b"OK")  # the connection survived it all


@pytest.mark.timing  # compares the times of two bcrypt checks
def test_verifying_an_unknown_user_costs_one_bcrypt_at_the_set_cost(serve):
    """A verify for a user nobody set is checked against the server's dummy hash, so that
    its answer takes as long as one for a user who exists: the dummy must have the
    configured cost (it is hashed at cost 4 and given that cost: apps/rest.c)."""
    srv = serve("rest", "epoll", "--bcrypt-cost", "12")
    with srv.connect() as s:
        buf = bytearray()

        def timed(raw: bytes):
            t0 = time.monotonic()
            s.sendall(raw)
            st, _, body = read_response(s, buf)
            return time.monotonic() - t0, st, body

        assert timed(post("/password/set/alice", pw_body("right")))[1] == 200
        known, unknown = [], []
        for _ in range(3):   # interleaved: a machine slowing down slows both
            took, st, _ = timed(post("/password/verify/alice", pw_body("wrong")))
            assert st == 403
            known.append(took)
            took, st, body = timed(post("/password/verify/nobody", pw_body("wrong")))
            assert (st, body) == (400, b"Password not found")
            unknown.append(took)
    # One bcrypt at cost 12 is some 250 ms here; a dummy of cost 4 would answer in 1 ms.
    assert 0.6 < sorted(unknown)[1] / sorted(known)[1] < 1.6, (known, unknown)


# --- a job that outlasts the idle timeout --------------------------------------

# The models whose jobs run on an offload pool, beside the loop; one variant of each.
@pytest.mark.models("plain", "offload")
def test_job_longer_than_the_idle_timeout(serve, model):
    """A password hash that takes longer than --idle-timeout: the connection
    waiting for it is not idle (it gets its answer), and the loop goes on
    serving others meanwhile. The idle sweep once found that connection
    again and again and spun the loop forever."""
    srv = serve("rest", model, "--bcrypt-cost", "13", "--idle-timeout", "200ms")
    with srv.connect() as a, srv.connect() as b:
        started = time.monotonic()
        a.sendall(post("/password/set/slow", pw_body("s3cret")))
        served = 0
        while True:   # others are served while the hash runs
            b.sendall(get("/"))
            assert read_response(b, bytearray())[0] == 200
            served += 1
            ready, _, _ = select.select([a], [], [], 0.05)
            if ready or time.monotonic() - started > 20:
                break
        status, _, body = read_response(a, bytearray())
        took = time.monotonic() - started
    assert (status, body) == (200, b"OK")
    assert took > 0.2, f"the hash took {took:.3f} s: not longer than the idle timeout"
    assert served >= 2
