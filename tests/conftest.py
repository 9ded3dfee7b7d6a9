"""Shared fixtures for the integration tests: start servers, wait on
conditions, check that no server process outlives its test.

Binaries come from $YARD_BIN (default build/bin), so the same tests run
against the release, ASan and TSan builds. $YARD_MODELS restricts the models
(comma-separated) a parameterised test runs under: the variants, and how a
test picks some with @pytest.mark.models(...), are in tests/variants.py.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

import variants
from variants import models

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("YARD_BIN", ROOT / "build" / "bin"))
# The default sweep of tests/variants.py's table, and the part of it
# $YARD_MODELS selects: what a test "under every model" runs.
ALL_MODELS = variants.ALL_MODELS
MODELS = variants.models()

# The reference peers (peers/<name>/run) speak the same echo, counter and
# sink protocols; the conformance tests run against them too (SERVERS).
# YARD_PEERS=0 leaves them out (the sanitizer runs do: the peers are not
# our code).
ALL_PEERS = ["go", "node", "node-cluster", "erlang", "elixir", "rust-tokio", "rust-monoio"]
PEERS = ALL_PEERS if os.environ.get("YARD_PEERS", "1") != "0" else []
SERVERS = MODELS + PEERS
# The Eve programs examples/eve/{echo,counter}.eve, compiled by the build
# (build/bin/eve-echo, eve-counter): the echo and counter conformance tests
# run against them too, as the server "eve". They take the address as their
# one argument and no options.
EVE = ["eve"] if os.environ.get("YARD_EVE", "1") != "0" else []


def peer_built(peer: str) -> bool:
    name = peer.split("-")[0]
    marker = {"go": "peers/go/bin/yard-peer-go", "node": "peers/node/node_modules",
              "erlang": "peers/erlang/ebin/yard_peer.beam",
              "elixir": "peers/elixir/ebin/.built",
              "rust": "peers/rust/target/release/yard-peer-rust"}[name]
    return (ROOT / marker).exists()


_MONOIO: list[str | None] = []


def _readable(f, timeout: float) -> bool:
    with selectors.DefaultSelector() as sel:
        sel.register(f, selectors.EVENT_READ)
        return bool(sel.select(timeout))


def monoio_unavailable() -> str | None:
    """Why the Rust peer's monoio runtime cannot run here (its message when
    io_uring is refused: it exits 1, as yard-serve's uring model does), or None."""
    if not _MONOIO:
        p = subprocess.Popen([ROOT / "peers" / "rust" / "run", "--runtime", "monoio", "--app",
                              "echo", "--listen", "127.0.0.1:0", "--workers", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # "listening ..." or, when it exits at once, nothing; at most 10 s
            line = p.stdout.readline() if _readable(p.stdout, 10) else b""
        finally:
            p.terminate()
            _, err = p.communicate(timeout=10)
        why = None
        if not line.startswith(b"listening "):
            why = err.decode(errors="replace").strip() or f"exit status {p.returncode}"
        _MONOIO.append(why)
    return _MONOIO[0]

# Any of these on a server's stderr fails the test that ran it.
SANITIZER_MARKERS = ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer"]

# "listening 127.0.0.1:7000 tls:127.0.0.1:7001": every address, a TLS listener's
# prefixed with "tls:" (docs/tls.md).
LISTENING = re.compile(rb"^listening ((?:tls:)?\S+:\d+)((?: (?:tls:)?\S+:\d+)*)\n$")


def listening_addresses(line: bytes) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The plain and the TLS (host, port) pairs of a 'listening' line."""
    plain, tls = [], []
    for a in line.decode().split()[1:]:
        dest = tls if a.startswith("tls:") else plain
        host, _, port = a.removeprefix("tls:").rpartition(":")
        dest.append((host.strip("[]"), int(port)))
    return plain, tls


def model_args(model: str) -> list[str]:
    """The yard-serve flags for a variant's name (a test id): --model and the
    flags of its row in tests/variants.py."""
    return variants.variant(model).args


_UNAVAILABLE: dict[str, str | None] = {}


def model_unavailable(model: str) -> str | None:
    """Why yard-serve says a model cannot run on this machine (io_uring
    refused by the kernel, a seccomp profile...), or None."""
    name = variants.variant(model).model
    if name not in _UNAVAILABLE:
        out = subprocess.run([str(BIN / "yard-serve"), "--list-models", "--json"],
                             capture_output=True, text=True, check=True)
        for m in json.loads(out.stdout):
            _UNAVAILABLE[m["name"]] = None if m["available"] else m["unavailable_reason"]
    return _UNAVAILABLE.get(name)


def skip_unavailable(model: str) -> None:
    """Skip, with the reason printed, a test of a model this machine cannot run."""
    why = model_unavailable(model) if model not in ALL_PEERS else None
    if why:
        pytest.skip(f"--model {variants.variant(model).model} is unavailable here: {why}")


def pytest_configure(config: pytest.Config) -> None:
    """Register @pytest.mark.models (pytest_generate_tests below) and
    @pytest.mark.timing (tests/pytest-suite)."""
    config.addinivalue_line(  # pytest-xdist's, named here for runs without it
        "markers", "xdist_group(name): tests of one group run on one worker, one at a time")
    config.addinivalue_line(
        "markers", "timing: the test asserts on elapsed time, a rate or a share of a CPU, "
        "which other tests running beside it would skew: tests/pytest-suite runs these alone, "
        "after the parallel phase")
    config.addinivalue_line(
        "markers", "models(*traits, names=None, extra=(), exclude=(), by_model=False): run "
        "the test once per variant of tests/variants.py that variants.models() selects with "
        "these arguments and $YARD_MODELS, as its model argument")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """$YARD_TEST_CPU=FILE: one JSON line per test appended to FILE, its wall
    time and the CPU seconds it cost: the pytest worker's own and that of the
    processes it started and reaped during the test (servers, tools). Finds
    the tests that make a CPU-bound suite long (docs/testing.md)."""
    path = os.environ.get("YARD_TEST_CPU")
    if not path:
        yield
        return
    t0, w0 = os.times(), time.monotonic()
    yield
    t1, w1 = os.times(), time.monotonic()
    own = (t1.user - t0.user) + (t1.system - t0.system)
    children = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    with open(path, "a") as f:
        f.write(json.dumps({"test": item.nodeid, "wall_s": round(w1 - w0, 3),
                            "cpu_s": round(own + children, 3),
                            "children_cpu_s": round(children, 3)}) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """@pytest.mark.models(...) parametrizes the test's model argument with
    variants.models(...). First, so that the model leads the test id
    (test_x[epoll-2]) beside the test's other parameters, as when it was a
    parametrize mark of its own."""
    marker = metafunc.definition.get_closest_marker("models")
    if marker is None:
        return
    if "model" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @pytest.mark.models needs "
                                "a 'model' argument to parametrize")
    metafunc.parametrize("model", models(*marker.args, **marker.kwargs))


def libcrypt():
    """libcrypt.so.1 (libxcrypt) through ctypes, with crypt and crypt_gensalt typed: the
    bcrypt yard-serve and the BEAM peers' NIF call, to check hashes made elsewhere. Skips
    the test where it is missing."""
    import ctypes
    try:
        lib = ctypes.CDLL("libcrypt.so.1")
    except OSError as e:
        pytest.skip(f"no libcrypt.so.1: {e}")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return lib


def run_threads(fns) -> None:
    """Each function in a thread of its own, all at once; every exception raised in them
    fails the caller (after all have ended, 120 s each at most)."""
    errors = []

    def wrap(f):
        try:
            f()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=wrap, args=(f,)) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors


def stop_clean(srv, timeout: float = 2.0) -> None:
    """SIGTERM: exit 0 within timeout, no process of the server's group left behind."""
    assert srv.stop(signal.SIGTERM, timeout=timeout) == 0, srv.stderr()
    wait_for(lambda: not srv.group_alive(), 3, "every process of the group to exit")


def wait_for(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition",
             interval: float = 0.01):
    """Poll cond until it returns something truthy; fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def read_line(stream, timeout: float, limit: int = 4096) -> bytes:
    """One line of a pipe (a server's 'listening' line), byte by byte so that
    nothing after it is taken; what came when the deadline passes, the pipe
    closes or limit bytes came without a newline."""
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    fd, buf = stream.fileno(), b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n") and len(buf) < limit:
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(left):
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        buf += chunk
    sel.close()
    return buf


def child_pids(pid: int) -> list[int]:
    """The child processes of pid (pgrep -P): a server's connection or
    reactor processes."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def process_group_alive(pgid: int) -> bool:
    """Whether any process of the group is still there."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Server:
    """A server process started in its own session, so that its whole process
    tree shares one process group we can check after it exits. start_timeout
    guards against a server that never says it listens: generous, since a
    REST server at bcrypt cost 16 spends seconds of CPU before it does, and
    the suites share the machine (tests/run-suites)."""

    def __init__(self, argv: list[str], tmp: Path, env: dict | None = None,
                 start_timeout: float = 60.0):
        self.argv = argv
        self.stderr_path = tmp / f"server-{os.getpid()}-{time.monotonic_ns()}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        self.pgid = self.proc.pid
        line = self._read_line(start_timeout)
        m = LISTENING.match(line)
        if not m:
            self.kill()
            raise AssertionError(f"{argv}: expected 'listening HOST:PORT', got {line!r}; "
                                 f"stderr: {self.stderr()}")
        # Every address, the first included: --listen NAME:P can name several;
        # addr is the first plain one (the first TLS one when there is none).
        self.addrs, self.tls_addrs = listening_addresses(line)
        self.host, self.port = (self.addrs or self.tls_addrs)[0]
        self.family = socket.AF_INET6 if ":" in self.host else socket.AF_INET

    def _read_line(self, timeout: float) -> bytes:
        return read_line(self.proc.stdout, timeout)

    @property
    def addr(self) -> tuple[str, int]:
        return (self.host, self.port)

    def connect(self, timeout: float = 10.0) -> socket.socket:
        s = socket.socket(self.family, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.addr)
        return s

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def group_alive(self) -> bool:
        return process_group_alive(self.pgid)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Signal the server, wait for it to exit, and return its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"server did not exit within {timeout}s of signal {sig}")

    def kill(self) -> None:
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(5)

    def close(self) -> None:
        """Stop gracefully (so sanitizers get to report at exit), then fail
        the test if a process outlived the server or a sanitizer spoke."""
        leftover = False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.group_alive():
            # Give children a moment to finish dying, then call it a leak.
            deadline = time.monotonic() + 3
            while self.group_alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            leftover = self.group_alive()
            if leftover:
                os.killpg(self.pgid, signal.SIGKILL)
        if self.proc.stdout:
            self.proc.stdout.close()
        self._stderr.close()
        report = [m for m in SANITIZER_MARKERS if m in self.stderr()]
        if report:
            raise AssertionError(f"{self.argv[0]}: sanitizer report ({report[0]}):\n"
                                 + self.stderr()[-4000:])
        if leftover:
            raise AssertionError(f"{self.argv}: a process of the server outlived it")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Keeps each phase's report on the item (item.rep_setup, rep_call), so that
    a fixture's teardown knows whether the test failed."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


@pytest.fixture
def start_server(tmp_path, request):
    """start_server(argv) -> Server; every server is stopped at teardown. When
    the test failed, each server's command, whether it was still running and
    the end of its stderr are printed (pytest shows them with the failure): a
    server that died or refused is then seen for what it was."""
    servers: list[Server] = []

    def start(argv: list[str], env: dict | None = None, **kw) -> Server:
        s = Server([str(a) for a in argv], tmp_path, env=env, **kw)
        servers.append(s)
        return s

    yield start
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for s in servers:
            status = s.proc.poll()
            print(f"server {' '.join(s.argv)}: "
                  f"{'still running' if status is None else f'exited with status {status}'}; "
                  f"the end of its stderr:\n{s.stderr()[-3000:]}")
    for s in servers:
        s.close()


@pytest.fixture
def serve(start_server):
    """serve(app, model, *flags) starts build/bin/yard-serve on 127.0.0.1:0,
    or, when model names a peer, that peer's launcher."""

    def start(app: str, model: str, *flags, listen: str = "127.0.0.1:0", env=None) -> Server:
        if model == "eve":
            if flags:
                pytest.skip(f"the Eve {app} program takes no options ({' '.join(flags)})")
            return start_server([BIN / f"eve-{app}", listen], env=env)
        if model in ALL_PEERS:
            if not peer_built(model):
                pytest.skip(f"peer {model} is not built (make peers)")
            name, _, variant = model.partition("-")
            if model == "rust-monoio" and (why := monoio_unavailable()):
                pytest.skip(f"rust-monoio is unavailable here: {why}")
            argv = [ROOT / "peers" / name / "run", "--app", app, "--listen", listen, *flags]
            if variant == "cluster":
                argv += ["--cluster", "2"]
            if name == "rust":
                argv += ["--runtime", variant]
        else:
            skip_unavailable(model)
            argv = [BIN / "yard-serve", "--app", app, *model_args(model), "--listen", listen,
                    *flags]
        return start_server(argv, env=env)

    return start


def assert_sheds_and_recovers(srv, clients: int = 80, min_served: int = 20) -> None:
    """For an echo server started under `prlimit --nofile=48:48`: the clients
    connect at once; those it cannot take see their connection closed (not a
    hang: accepted and dropped), it says it is shedding, the ones it took are
    served, and once they leave a new client is served again."""
    conns = [socket.create_connection(srv.addr, timeout=10) for _ in range(clients)]
    served, shed = [], []
    for i, s in enumerate(conns):
        s.settimeout(10)
        msg = b"client %d" % i
        try:
            s.sendall(msg)
            got = s.recv(64)
        except (ConnectionResetError, BrokenPipeError):
            got = b""
        assert got in (msg, b""), got
        (served if got == msg else shed).append(s)
    assert shed, "every client was served under a limit of 48 descriptors"
    assert len(served) >= min_served, \
        f"only {len(served)} clients served; the server said: {srv.stderr()}"
    wait_for(lambda: "shedding connections" in srv.stderr(), timeout=10,
             what="the shedding message")
    for s in conns:
        s.close()
    wait_for(lambda: echo_eventually_ok(srv), timeout=10, what="an echo after recovery")


def echo_ok(server, msg=b"still here") -> bool:
    with server.connect(timeout=5) as s:
        s.sendall(msg)
        return recv_exactly(s, len(msg)) == msg


def echo_eventually_ok(server) -> bool:
    """For wait_for: a connection refused, or closed because a slot or a
    descriptor is not free yet, counts as "not yet", not as a failure."""
    try:
        return echo_ok(server)
    except (OSError, AssertionError):
        return False


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        c = sock.recv(min(n, 1 << 20))
        if not c:
            raise AssertionError(f"connection closed with {n} bytes still expected")
        chunks.append(c)
        n -= len(c)
    return b"".join(chunks)


def scripted_server(handle: Callable[[socket.socket], None]) -> socket.socket:
    """A listener on 127.0.0.1 whose every connection is served by
    handle(sock) on a thread of its own: the misbehaving or minimal servers
    the load-generator tests talk to. A client that goes away mid-script
    ends that connection quietly. Close the listener to stop accepting."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)

    def conn(s):
        try:
            handle(s)
        except (OSError, AssertionError):  # recv_exactly's "connection closed"
            pass
        finally:
            s.close()

    def accept():
        while True:
            try:
                s, _ = ls.accept()
            except OSError:
                return
            threading.Thread(target=conn, args=(s,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return ls


def recv_until_closed(sock: socket.socket, limit: int = 1 << 24) -> bytes:
    chunks, total = [], 0
    while total < limit:
        c = sock.recv(65536)
        if not c:
            break
        chunks.append(c)
        total += len(c)
    return b"".join(chunks)


def server_has_read(client: socket.socket) -> bool:
    """True when the server side of this loopback connection has read every
    byte the client sent: its socket's receive queue in /proc/net/tcp{,6}
    is empty. Lets a test wait for "the server has the data" without
    sleeping."""
    local = client.getsockname()[1]
    remote = client.getpeername()[1]
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            lport = int(f[1].rsplit(":", 1)[1], 16)
            rport = int(f[2].rsplit(":", 1)[1], 16)
            if lport == remote and rport == local:
                rx_queue = int(f[4].split(":")[1], 16)
                return rx_queue == 0
    return False


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA and a server certificate for localhost (tlslib.make_pki),
    made once per module."""
    from tlslib import make_pki  # tests/integration's, on the path once a test there runs
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def yard_chat_built():
    """The chat suites need yard-chat (accounts, the log tools, the client):
    without it their tests fail, rather than the suites skipping themselves."""
    chat = BIN / "yard-chat"
    assert chat.exists(), f"{chat} is missing: build it (make build)"
