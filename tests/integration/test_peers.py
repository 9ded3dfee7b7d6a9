"""The reference peers (peers/go, peers/node, peers/erlang, peers/elixir, peers/rust on tokio
and on monoio) speak the engine's protocols exactly: echo, counter, sink and the REST API, started through
their launchers, with a clean exit on SIGTERM and no process left behind."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import (BIN, ROOT, libcrypt, monoio_unavailable, recv_exactly, recv_until_closed,
                      run_threads, stop_clean, wait_for)

PEERS = {
    "go": ("go", [], "go"),
    "node": ("node", [], "node"),
    "node-cluster": ("node", ["--cluster", "2"], "node"),
    "erlang": ("erlang", [], "erl"),
    "elixir": ("elixir", [], "elixir"),
    "rust-tokio": ("rust", ["--runtime", "tokio"], "cargo"),
    "rust-monoio": ("rust", ["--runtime", "monoio"], "cargo"),
}
BEAM_PEERS = ["erlang", "elixir"]
# The apps of a peer that does not serve all five.
PEER_APPS = {"rust-monoio": {"echo", "counter", "sink"}}
_built: set[str] = set()


def peer_argv(peer: str, app: str, *flags: str) -> list:
    """The launcher argv for a peer, building it (make -C peers) once."""
    directory, extra, tool = PEERS[peer]
    if app not in PEER_APPS.get(peer, {app}):
        pytest.skip(f"{peer} does not serve --app {app} (docs/peers.md)")
    if tool == "go" and not (shutil.which("go") or os.path.exists("/usr/local/go/bin/go")):
        pytest.skip("no Go toolchain")
    if tool == "cargo" and not cargo_found():
        pytest.skip("no cargo (Rust >= 1.85; see peers/Makefile)")
    if tool not in ("go", "cargo") and not shutil.which(tool):
        pytest.skip(f"no {tool} toolchain")
    if directory not in _built:
        r = subprocess.run(["make", "-C", str(ROOT / "peers"), directory],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"make -C peers {directory} failed:\n{r.stdout}\n{r.stderr}"
        _built.add(directory)
    if peer == "rust-monoio" and (why := monoio_unavailable()):
        pytest.skip(f"rust-monoio is unavailable here: {why}")
    return [ROOT / "peers" / directory / "run", "--app", app, "--listen", "127.0.0.1:0",
            *extra, *flags]


def cargo_found() -> bool:
    return bool(shutil.which("cargo")) or os.path.exists(os.path.expanduser("~/.cargo/bin/cargo"))


@pytest.fixture(params=list(PEERS))
def peer(request):
    return request.param


# ---- echo -------------------------------------------------------------------

def test_echo_byte_exact(peer, start_server):
    srv = start_server(peer_argv(peer, "echo"))
    rng = random.Random(7)

    def client(seed):
        r = random.Random(seed)
        with srv.connect(30) as s:
            for size in (1, 17, 4096, 65537, 1 << 20):
                payload = r.randbytes(size)
                sender = threading.Thread(target=s.sendall, args=(payload,))
                sender.start()
                assert recv_exactly(s, size) == payload
                sender.join()

    run_threads([lambda seed=rng.random(): client(seed) for _ in range(4)])
    stop_clean(srv, timeout=5)


# ---- counter ----------------------------------------------------------------

def test_counter_exact_under_concurrency(peer, start_server):
    srv = start_server(peer_argv(peer, "counter"))
    clients, increments, batch = 8, 10_000, 100

    def client():
        last = 0
        with srv.connect(30) as s:
            for _ in range(increments // batch):
                s.sendall(b"\x01" * batch)
                data = recv_exactly(s, 8 * batch)
                for i in range(batch):
                    v = int.from_bytes(data[8 * i:8 * i + 8], "big")
                    assert v > last, f"reply {v} after {last}"
                    last = v

    run_threads([client] * clients)
    with srv.connect() as s:
        s.sendall(b"\x00")
        assert int.from_bytes(recv_exactly(s, 8), "big") == clients * increments
    stop_clean(srv, timeout=5)


def test_counter_bad_byte_closes_only_that_connection(peer, start_server):
    srv = start_server(peer_argv(peer, "counter"))
    with srv.connect() as good, srv.connect() as bad:
        good.sendall(b"\x01")
        assert int.from_bytes(recv_exactly(good, 8), "big") == 1
        bad.sendall(b"\x01\x00\x07")
        assert recv_exactly(bad, 16) == (2).to_bytes(8, "big") + (2).to_bytes(8, "big")
        assert recv_until_closed(bad) == b""
        good.sendall(b"\x00\x01")
        assert recv_exactly(good, 16) == (2).to_bytes(8, "big") + (3).to_bytes(8, "big")
    stop_clean(srv, timeout=5)


# ---- sink -------------------------------------------------------------------

def server_rx_empty(port: int, client_ports: set[int]) -> bool:
    """True when the server has read everything these clients sent: its
    sockets for them show an empty receive queue in /proc/net/tcp*."""
    seen = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, remote, queues = fields[1], fields[2], fields[4]
                if int(local.rsplit(":", 1)[1], 16) != port:
                    continue
                rport = int(remote.rsplit(":", 1)[1], 16)
                if rport in client_ports:
                    if int(queues.split(":")[1], 16) != 0:
                        return False
                    seen.add(rport)
    return seen == client_ports


@pytest.mark.parametrize("flush", ["each", "buffered"])
def test_sink_writes_exactly_what_was_sent(peer, flush, start_server, tmp_path):
    out = tmp_path / "sink.out"
    srv = start_server(peer_argv(peer, "sink", "--out", str(out), "--flush", flush))
    # Each connection writes bytes from its own alphabet, so its stream can be
    # picked out of the interleaved file and compared byte for byte.
    n = 4
    sent = {}
    for i in range(n):
        r = random.Random(i)
        alphabet = bytes(range(i * 64, i * 64 + 64))
        sent[i] = bytes(r.choice(alphabet) for _ in range(300_000))

    def client(i):
        with srv.connect(30) as s:
            view = memoryview(sent[i])
            for off in range(0, len(view), 7000):
                s.sendall(view[off:off + 7000])

    run_threads([lambda i=i: client(i) for i in range(n)])
    total = sum(len(v) for v in sent.values())
    wait_for(lambda: out.exists() and out.stat().st_size >= total, 10, "all bytes in --out")
    data = out.read_bytes()
    assert len(data) == total
    for i in range(n):
        lo = i * 64
        assert bytes(b for b in data if lo <= b < lo + 64) == sent[i], f"connection {i}"
    stop_clean(srv, timeout=5)


@pytest.mark.parametrize("flush", ["each", "buffered"])
def test_sink_lines_intact(peer, flush, start_server, tmp_path):
    out = tmp_path / "sink.out"
    srv = start_server(peer_argv(peer, "sink", "--out", str(out), "--flush", flush))
    conns = [srv.connect() for _ in range(4)]
    expected = []
    for j in range(200):
        for i, s in enumerate(conns):
            line = f"conn {i} line {j:04d} {'x' * 40}\n".encode()
            s.sendall(line)
            expected.append(line)
    for s in conns:
        s.close()
    total = sum(map(len, expected))
    wait_for(lambda: out.exists() and out.stat().st_size >= total, 10, "all lines in --out")
    lines = out.read_bytes().splitlines(keepends=True)
    assert sorted(lines) == sorted(expected)
    for i in range(4):
        mine = [ln for ln in lines if ln.startswith(f"conn {i} ".encode())]
        assert mine == [ln for ln in expected if ln.startswith(f"conn {i} ".encode())]
    stop_clean(srv, timeout=5)


@pytest.mark.parametrize("flush", ["each", "buffered"])
def test_sink_sigterm_loses_nothing(peer, flush, start_server, tmp_path):
    out = tmp_path / "sink.out"
    srv = start_server(peer_argv(peer, "sink", "--out", str(out), "--flush", flush))
    conns = [srv.connect() for _ in range(3)]
    payloads = [bytes([65 + i]) * 10_000 for i in range(3)]  # under 64 KiB: still buffered
    for s, p in zip(conns, payloads):
        s.sendall(p)
    ports = {s.getsockname()[1] for s in conns}
    wait_for(lambda: server_rx_empty(srv.port, ports), 10, "the server to read every byte")
    stop_clean(srv, timeout=5)
    data = out.read_bytes()
    for i, p in enumerate(payloads):
        assert data.count(bytes([65 + i])) == len(p)
    assert len(data) == sum(map(len, payloads))
    for s in conns:
        s.close()


# ---- go --print: the papayaChat study's Go server ------------------------------
#
# `--app sink --print` prints each read's bytes with fmt.Print to standard
# output, unbuffered, and sends standard output to --out (default /dev/null)
# once "listening" is printed. The experiments call it go-papaya.

def papaya_argv(*flags: str) -> list:
    return peer_argv("go", "sink", "--print", *flags)


def test_go_print_writes_exactly_what_was_sent(start_server, tmp_path):
    out = tmp_path / "stdout.out"
    srv = start_server(papaya_argv("--out", str(out)))
    n = 4
    sent = {i: bytes(random.Random(i).choice(range(i * 64, i * 64 + 64)) for _ in range(200_000))
            for i in range(n)}

    def client(i):
        with srv.connect(30) as s:
            view = memoryview(sent[i])
            for off in range(0, len(view), 5000):
                s.sendall(view[off:off + 5000])

    run_threads([lambda i=i: client(i) for i in range(n)])
    total = sum(map(len, sent.values()))
    wait_for(lambda: out.stat().st_size >= total, 10, "all bytes on standard output")
    data = out.read_bytes()
    assert len(data) == total
    for i in range(n):
        assert bytes(b for b in data if i * 64 <= b < i * 64 + 64) == sent[i], f"connection {i}"
    stop_clean(srv, timeout=5)


def test_go_print_is_unbuffered_and_stdout_leaves_the_pipe(start_server, tmp_path):
    """Each chunk is on standard output as soon as the server has read it (no buffer to
    fill), and nothing but the listening line reaches the harness's pipe."""
    out = tmp_path / "stdout.out"
    srv = start_server(papaya_argv("--out", str(out)))
    with srv.connect() as s:
        port = {s.getsockname()[1]}
        for k in range(1, 6):
            s.sendall(b"message\n" * 3)
            wait_for(lambda: server_rx_empty(srv.port, port), 10, "the server to read it")
            wait_for(lambda: out.stat().st_size == 24 * k, 5, f"{24 * k} bytes written")
        stop_clean(srv, timeout=5)
    assert out.read_bytes() == b"message\n" * 15
    assert srv.proc.stdout.read() == b""  # the listening line was consumed at start


def test_go_print_sigterm_loses_nothing(start_server, tmp_path):
    out = tmp_path / "stdout.out"
    srv = start_server(papaya_argv("--out", str(out)))
    conns = [srv.connect() for _ in range(3)]
    for i, s in enumerate(conns):
        s.sendall(bytes([65 + i]) * 20_000)
    ports = {s.getsockname()[1] for s in conns}
    wait_for(lambda: server_rx_empty(srv.port, ports), 10, "the server to read every byte")
    stop_clean(srv, timeout=5)
    data = out.read_bytes()
    assert [data.count(bytes([65 + i])) for i in range(3)] == [20_000] * 3
    for s in conns:
        s.close()


@pytest.mark.parametrize("bad, needle", [
    (["--app", "echo", "--print"], b"--print belongs to --app sink"),
    (["--app", "sink", "--print", "--flush", "buffered"], b"--flush buffered does not apply"),
])
def test_go_print_usage_errors(bad, needle):
    argv = [str(a) for a in peer_argv("go", "sink")]
    argv = [a for a in argv if a not in ("--app", "sink")]
    r = subprocess.run(argv + bad, capture_output=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr


# ---- SIGTERM ------------------------------------------------------------------

@pytest.mark.parametrize("app", ["echo", "counter", "sink", "rest"])
def test_sigterm_exits_zero_with_open_connection(peer, app, start_server):
    srv = start_server(peer_argv(peer, app, "--bcrypt-cost", "4") if app == "rest"
                       else peer_argv(peer, app))
    with srv.connect():
        stop_clean(srv, timeout=5)


def test_bad_flag_exits_2(peer):
    argv = peer_argv(peer, "echo")
    for bad in (["--flush", "sometimes"], ["--app", "nope"], ["--no-such-flag"]):
        r = subprocess.run([str(a) for a in argv] + bad, capture_output=True, timeout=30)
        assert r.returncode == 2, (bad, r.stderr)
        assert r.stderr, bad


# ---- REST -------------------------------------------------------------------

def request(srv, method, path, body=None):
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        c.close()


def test_rest_routes(peer, start_server):
    srv = start_server(peer_argv(peer, "rest", "--bcrypt-cost", "4", "--longpoll-ms", "200"))
    assert request(srv, "GET", "/")[0] == 200

    # Every peer has bcrypt now (Erlang and Elixir through peers/beam_bcrypt).
    pw = json.dumps({"password": "s3cret"})
    code, ctype, body = request(srv, "POST", "/password/set/alice", pw)
    assert (code, body) == (200, b"OK") and ctype.startswith("text/plain")
    assert request(srv, "POST", "/password/verify/alice", pw)[:3:2] == (200, b"OK")
    assert request(srv, "POST", "/password/verify/alice",
                   json.dumps({"password": "wrong"}))[0] == 403
    assert request(srv, "POST", "/password/verify/bob", pw)[::2] == (400, b"Password not found")
    assert request(srv, "POST", "/password/set/alice", "{not json")[0] == 400

    # Fresh connections: in a cluster they reach different workers, and the
    # sharded store must still find every user.
    users = {f"user{i}": {"name": f"User {i}", "tags": [i, "x"], "ok": True} for i in range(12)}
    for name, obj in users.items():
        code, ctype, body = request(srv, "POST", f"/user/set/{name}", json.dumps(obj))
        assert (code, body) == (200, b"OK") and ctype.startswith("text/plain")
    for name, obj in users.items():
        code, ctype, body = request(srv, "GET", f"/user/get/{name}")
        assert code == 200 and ctype.startswith("application/json"), (code, ctype)
        assert json.loads(body) == obj
    assert request(srv, "GET", "/user/get/nobody")[::2] == (400, b"User not found.")
    for bad in ("{", "[1, 2]", '"str"', "", '{"a": 1} trailing'):
        assert request(srv, "POST", "/user/set/carol", bad)[0] == 400, bad

    assert request(srv, "GET", "/no/such/path")[0] == 404
    assert request(srv, "GET", "/password/set/alice")[0] == 405
    assert request(srv, "POST", "/user/get/alice")[0] == 405
    assert request(srv, "POST", "/longPoll")[0] == 405
    stop_clean(srv, timeout=5)


def test_rest_long_poll(peer, start_server):
    srv = start_server(peer_argv(peer, "rest", "--bcrypt-cost", "4", "--longpoll-ms", "200"))
    results = []

    def poll():
        t0 = time.monotonic()
        code, ctype, body = request(srv, "GET", "/longPoll")
        results.append((code, body, ctype.startswith("text/plain"), time.monotonic() - t0))

    run_threads([poll] * 10)
    assert len(results) == 10
    for code, body, plain, elapsed in results:
        assert (code, body, plain) == (200, b"OK", True)
        assert elapsed >= 0.19  # answered only after --longpoll-ms, not the 5 s default
        assert elapsed < 4.5
    stop_clean(srv, timeout=5)


# ---- bcrypt on the BEAM (peers/beam_bcrypt) -------------------------------------

@pytest.mark.parametrize("peer", BEAM_PEERS + ["rust-tokio"])
def test_beam_password_routes(peer, start_server):
    """The NIF's hashes (the bcrypt crate's for rust-tokio) verify the right password
    only, JSON escapes are decoded before hashing, and unknown users and bad bodies
    are refused."""
    srv = start_server(peer_argv(peer, "rest", "--bcrypt-cost", "5"))
    users = {"alice": "s3cret", "bob": "p\u00e4ss w\u00f6rd", "carol": "x" * 72}
    for user, pw in users.items():
        assert request(srv, "POST", f"/password/set/{user}",
                       json.dumps({"password": pw}))[::2] == (200, b"OK"), user
    for user, pw in users.items():
        ok = json.dumps({"password": pw})
        assert request(srv, "POST", f"/password/verify/{user}", ok)[::2] == (200, b"OK"), user
        # ensure_ascii=False: the raw UTF-8 body must verify like the escaped one
        raw = json.dumps({"password": pw}, ensure_ascii=False).encode()
        assert request(srv, "POST", f"/password/verify/{user}", raw)[0] == 200, user
        assert request(srv, "POST", f"/password/verify/{user}",
                       json.dumps({"password": pw[:-1] + "!"}))[0] == 403, user
        assert request(srv, "POST", f"/password/verify/{user}",
                       json.dumps({"password": pw[:-1]}))[0] == 403, user
    # a new set replaces the hash
    assert request(srv, "POST", "/password/set/alice", json.dumps({"password": "n3w"}))[0] == 200
    assert request(srv, "POST", "/password/verify/alice", json.dumps({"password": "s3cret"}))[0] == 403
    assert request(srv, "POST", "/password/verify/alice", json.dumps({"password": "n3w"}))[0] == 200
    assert request(srv, "POST", "/password/verify/nobody",
                   json.dumps({"password": "s3cret"}))[::2] == (400, b"Password not found")
    assert request(srv, "POST", "/password/set/dave", json.dumps({"pass": "x"}))[::2] == \
        (400, b"Missing password.")
    assert request(srv, "POST", "/password/set/dave", json.dumps({"password": "x" * 73}))[0] == 400
    assert request(srv, "POST", "/password/set/dave", json.dumps({"password": 7}))[0] == 400
    assert request(srv, "POST", "/password/verify/dave", json.dumps({"password": "x"}))[0] == 400
    stop_clean(srv, timeout=5)


# One thread for the connections: BEAM's one normal scheduler, tokio's one worker.
ONE_SCHEDULER = {"erlang": ["--schedulers", "1"], "elixir": ["--schedulers", "1"],
                 "rust-tokio": ["--workers", "1"]}


@pytest.mark.parametrize("peer", list(ONE_SCHEDULER))
def test_beam_bcrypt_runs_on_a_dirty_scheduler(peer, start_server):
    """With one normal scheduler (--schedulers 1), a costly hash must not stop
    other connections from being served: the NIF runs on a dirty CPU
    scheduler. Were it on the normal scheduler, no GET / would be answered
    until the hash is done. The same for tokio with one worker thread: the
    hash runs on spawn_blocking's pool."""
    # Cost 14: some 1 s per hash on this machine (the dummy hash at start-up too).
    srv = start_server(peer_argv(peer, "rest", "--bcrypt-cost", "14", *ONE_SCHEDULER[peer]))
    assert request(srv, "GET", "/")[0] == 200  # warm: inets starts its machinery
    done = threading.Event()
    result = {}

    def hash_once():
        t0 = time.monotonic()
        result["code"] = request(srv, "POST", "/password/set/slow",
                                 json.dumps({"password": "s3cret"}))[0]
        result["secs"] = time.monotonic() - t0
        done.set()

    hasher = threading.Thread(target=hash_once)
    hasher.start()
    answered_during, worst = 0, 0.0
    deadline = time.monotonic() + 60
    while not done.is_set() and time.monotonic() < deadline:
        t0 = time.monotonic()
        code = request(srv, "GET", "/")[0]
        took = time.monotonic() - t0
        assert code == 200
        if not done.is_set():
            answered_during += 1
            worst = max(worst, took)
    hasher.join(60)
    assert result.get("code") == 200, result
    assert result["secs"] > 0.5, f"a cost-14 hash took {result['secs']:.2f} s: too fast to test"
    assert answered_during >= 5, f"only {answered_during} GET / answered during the hash"
    assert worst < result["secs"] / 2, (worst, result["secs"])
    stop_clean(srv, timeout=5)


def test_elixir_http_keepalive_pipelining_chunked(start_server):
    """The Elixir peer's own HTTP/1.1: requests sent back to back on one
    connection (Content-Length and chunked bodies) are answered in order,
    and Connection: close closes after its answer."""
    srv = start_server(peer_argv("elixir", "rest", "--bcrypt-cost", "4", "--longpoll-ms", "100"))
    body = b'{"name": "Ann", "n": [1, 2]}'
    chunked = b"5\r\n" + body[:5] + b"\r\n" + f"{len(body) - 5:x}".encode() + b";ext=1\r\n" \
        + body[5:] + b"\r\n0\r\nX-Trailer: 1\r\n\r\n"
    reqs = (b"POST /user/set/ann HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            + b"GET /longPoll HTTP/1.1\r\nHost: x\r\n\r\n"
            + b"POST /user/set/bo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
            + b"GET /user/get/bo HTTP/1.1\r\nHost: x\r\n\r\n"
            + b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
            + b"GET /user/get/ann HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # after close: never answered
    with srv.connect() as s:
        s.sendall(reqs)
        data = recv_until_closed(s)
    statuses = [int(c) for c in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]
    assert statuses == [200, 200, 200, 200, 404, 200], data
    assert data.count(body) == 2  # both stored bodies came back, the chunked one reassembled
    assert data.rstrip().endswith(body)
    # malformed framing: 400 and closed
    with srv.connect() as s:
        s.sendall(b"POST /user/set/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\nabc")
        data = recv_until_closed(s)
    assert data.startswith(b"HTTP/1.1 400 "), data
    with srv.connect() as s:
        s.sendall(b"POST /user/set/x HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n")
        assert recv_until_closed(s).startswith(b"HTTP/1.1 413 ")
    stop_clean(srv, timeout=5)


# ---- the Rust peer: bcrypt against libcrypt, monoio's limits ---------------------

def test_rust_unit_tests_pass():
    """The Rust peer's own unit tests (flag parsing, the counter's replies, the broadcast
    line cutter and its 64 KiB limit): `cargo test --release` in the peer's target
    directory, which reuses the crates `make peers` built (a second or two)."""
    peer_argv("rust-tokio", "echo")  # skips without cargo; builds the peer once
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    r = subprocess.run([cargo, "test", "--release", "--locked", "--quiet", "--target-dir",
                        "target"], cwd=ROOT / "peers" / "rust", capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    counts = re.findall(r"test result: ok\. (\d+) passed; 0 failed", r.stdout)
    assert counts and sum(map(int, counts)) >= 5, r.stdout


def test_rust_bcrypt_hashes_verify_in_libcrypt_and_back():
    """A $2b$ hash made by the Rust peer's bcrypt verifies in libcrypt (what
    yard-serve's rest app calls) and one made by libcrypt verifies in the Rust
    peer; a wrong password fails both ways."""
    argv = [str(a) for a in peer_argv("rust-tokio", "rest")[:1]] + ["bcrypt"]
    lib = libcrypt()
    for pw in ("s3cret", "p\u00e4ss w\u00f6rd \U0001f600", "x" * 72):
        raw = pw.encode()
        r = subprocess.run(argv + ["hash", pw, "5"], capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        rust_hash = r.stdout.strip()
        assert re.fullmatch(rb"\$2b\$05\$[./A-Za-z0-9]{53}", rust_hash), rust_hash
        assert lib.crypt(raw, rust_hash) == rust_hash, pw
        wrong = "!" + pw[1:]  # not pw + "!": bcrypt reads only 72 bytes
        assert lib.crypt(wrong.encode(), rust_hash) != rust_hash, pw

        salt = lib.crypt_gensalt(b"$2b$", 5, None, 0)
        c_hash = lib.crypt(raw, salt)
        assert c_hash.startswith(b"$2b$05$"), c_hash
        ok = subprocess.run(argv + ["verify", pw, c_hash.decode()], capture_output=True, timeout=30)
        assert ok.returncode == 0, (pw, ok.stderr)
        bad = subprocess.run(argv + ["verify", wrong, c_hash.decode()], capture_output=True,
                             timeout=30)
        assert bad.returncode == 1, (pw, bad.stderr)
    for bad_args in (["hash"], ["hash", "pw", "3"], ["frobnicate"]):
        r = subprocess.run(argv + bad_args, capture_output=True, timeout=30)
        assert r.returncode == 2 and r.stderr, bad_args
    r = subprocess.run(argv + ["verify", "pw", "not a hash"], capture_output=True, timeout=30)
    assert r.returncode == 1 and b"bcrypt verify" in r.stderr


@pytest.mark.parametrize("app", ["rest", "broadcast"])
def test_rust_monoio_refuses_what_it_does_not_serve(app):
    argv = [str(a) for a in peer_argv("rust-monoio", "echo")]
    argv[argv.index("echo")] = app
    r = subprocess.run(argv, capture_output=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert b"--runtime monoio serves echo, counter and sink" in r.stderr


def test_rust_monoio_without_io_uring_exits_1():
    """Where the kernel refuses io_uring (here: a seccomp filter), the monoio
    runtime says so and exits 1 before listening, like yard-serve's uring."""
    no_uring = BIN / "yard-test-no-uring"
    if not no_uring.exists():
        pytest.skip(f"{no_uring} is not built")
    argv = [str(a) for a in peer_argv("rust-monoio", "echo")]
    r = subprocess.run([str(no_uring), *argv], capture_output=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert r.stdout == b""
    assert b"io_uring is unavailable here" in r.stderr


@pytest.mark.parametrize("workers", ["1", "3"])
def test_rust_monoio_workers_share_the_port(workers, start_server):
    """--workers N: N runtimes, each with its own SO_REUSEPORT listener on the
    one port printed; connections spread over them are all served, and the
    counter stays exact across the threads."""
    srv = start_server(peer_argv("rust-monoio", "counter", "--workers", workers))
    task = f"/proc/{srv.proc.pid}/task"
    wait_for(lambda: len(os.listdir(task)) >= int(workers), 5, f"{workers} threads")
    conns = [srv.connect() for _ in range(24)]
    for s in conns:
        s.sendall(b"\x01" * 10)
    for s in conns:
        recv_exactly(s, 80)
    with srv.connect() as s:
        s.sendall(b"\x00")
        assert int.from_bytes(recv_exactly(s, 8), "big") == 240
    for s in conns:
        s.close()
    stop_clean(srv, timeout=5)


def test_rust_build_names_the_missing_toolchain(tmp_path):
    """Without a cargo of Rust >= 1.85, `make -C peers rust` fails saying what to install,
    and `make -C peers` (rust-if-cargo) says it skips the Rust peer and succeeds."""
    old = tmp_path / "cargo"
    old.write_text("#!/bin/sh\necho 'cargo 1.63.0 (debian)'\n")
    old.chmod(0o755)
    for cargo, needle in (("/nonexistent/cargo", "no cargo found"), (str(old), "is Rust 1.63.0")):
        # -B: the check runs even though the binary may be up to date; it fails before cargo.
        r = subprocess.run(["make", "-C", str(ROOT / "peers"), f"CARGO={cargo}", "-B", "rust"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, r.stdout
        assert needle in r.stderr and ">= 1.85" in r.stderr and "https://rustup.rs" in r.stderr
        r = subprocess.run(["make", "-C", str(ROOT / "peers"), f"CARGO={cargo}", "rust-if-cargo"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "peers: skipping the Rust peer: " in r.stderr and needle in r.stderr
