"""The Eve paper's Programs 1 and 2 as printed (issue 42, docs/eve.md "The paper's listings").

The listings are the study's text, kept outside the project in ../shared/eve/
(a sibling of the repository, as CI has it); these tests read them from
there and are skipped, saying why, where that directory is absent. They are
never copied into the project.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BIN, ROOT

SHARED = ROOT.parent / "shared" / "eve"
PROGRAM1 = SHARED / "program1.eve"
PROGRAM2 = SHARED / "program2.eve"
YARD_EVE = BIN / "yard-eve"


def listing(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"the paper's listing {path.name} is not here: {SHARED} is absent "
                    f"(it is a sibling of the repository in CI)")
    return path


def run(argv, timeout=180, env=None, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kw)


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


# ---- Program 1: yard-eve call ------------------------------------------------------------------

@pytest.mark.parametrize("workers", ["1", "2"])
def test_program1_as_printed_through_call(workers):
    r = run([YARD_EVE, "call", listing(PROGRAM1), "fib", "30"], env={"YARD_EVE_WORKERS": workers})
    assert (r.returncode, r.stdout, r.stderr) == (0, b"832040\n", b"")


def test_program1_small_values():
    for n in (0, 1, 2, 10):
        r = run([YARD_EVE, "call", listing(PROGRAM1), "fib", str(n)])
        assert (r.returncode, r.stdout) == (0, f"{fib(n)}\n".encode()), r.stderr


def test_program1_timed_record():
    r = run([YARD_EVE, "call", "--json", "--repeat", "3", listing(PROGRAM1), "fib", "20"],
            env={"YARD_EVE_WORKERS": "2"})
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["function"] == "fib" and rec["args"] == ["20"] and rec["result"] == fib(20)
    assert (rec["repeat"], rec["workers"], len(rec["times_s"])) == (3, 2, 3)
    assert 0 < rec["min_s"] == min(rec["times_s"]) <= rec["median_s"] == sorted(rec["times_s"])[1]


@pytest.mark.parametrize("args,message", [
    (["fob", "3"], "yard-eve: call: {f} has no function 'fob' (its functions: fib)"),
    (["fib"], "yard-eve: call: 'fib' takes 1 argument, 0 given"),
    (["fib", "1", "2"], "yard-eve: call: 'fib' takes 1 argument, 2 given"),
    (["fib", "3x"], "yard-eve: call: argument 1 of 'fib' is an int; '3x' is not a whole number"),
    (["fib", "99999999999999999999"], "yard-eve: call: argument 1 of 'fib' is an int; "
                                      "'99999999999999999999' is not a whole number"),
])
def test_program1_call_errors(args, message):
    f = listing(PROGRAM1)
    r = run([YARD_EVE, "call", f, *args])
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode().startswith(message.format(f=f)), r.stderr


# ---- Program 2: the broadcast chat, on port 8080 as printed --------------------------------------

PORT = 8080
# The tests that take PORT run on one pytest-xdist worker, one after the other: side by
# side, one found the port taken by the other and skipped (a skip in the parallel phase of
# some make test runs and not others).
ON_PORT = pytest.mark.xdist_group("eve-program2-port")
# Each reading the listing needed, as yard-eve warns of it (docs/eve.md lists them with the lines).
PROGRAM2_WARNINGS = [
    ":20:5: warning: 'return' at the indentation of the handler block: taken as the last statement "
    "of the handler 'connection' above it",
    ":22:3: warning: the handler 'error' is assigned after the handler block of the call on line 7: "
    "taken as one more handler of that call",
    ":5:16: warning: 'socket@' as a type argument: taken as tcp_socket",
    ":14:19: warning: 'socket@' as a loop variable's type: taken as tcp_socket",
    ":22:12: warning: 'stderr' belongs to the library and needs no permission: '+stderr' is ignored",
    ":23:48: warning: 'error' is the handler's name, not a variable: taken as its parameter 'e'",
]


def port_taken(port: int) -> str | None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # as the runtime's listener does: connections of an earlier run waiting
    # out TIME_WAIT do not make the port taken
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
    except OSError as e:
        return f"port {port}, which Program 2 listens on as printed, is taken here ({e.strerror})"
    finally:
        s.close()
    return None


def connect_when_listening(proc, timeout=15.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"program 2 ended with {proc.returncode}: {proc.stderr.read()!r}"
        try:
            return socket.create_connection(("127.0.0.1", PORT), timeout=1)
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on {PORT} after {timeout} s")
            time.sleep(0.05)


def sockets_of(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def wait_sockets(pid: int, want: int, timeout=10.0) -> int:
    """The server's count of open sockets, once it is `want` (or at the timeout)."""
    deadline = time.monotonic() + timeout
    n = sockets_of(pid)
    while n != want and time.monotonic() < deadline:
        time.sleep(0.02)
        n = sockets_of(pid)
    return n


class Reader:
    """A client's bytes, read as they come; lines waited for with a deadline."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""
        sock.settimeout(0.2)

    def expect(self, want: bytes, timeout=10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.buf) < len(want) and time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            self.buf += chunk
        got, self.buf = self.buf[:len(want)], self.buf[len(want):]
        assert got == want, f"expected {want!r}, got {got!r}"

    def quiet(self, for_s=0.3) -> None:
        """Nothing more arrives (after every expected line was taken)."""
        deadline = time.monotonic() + for_s
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            assert not chunk or chunk == b"", f"unexpected {chunk!r}"
            break
        assert self.buf == b"", f"unexpected {self.buf!r}"


def test_program2_compiles_unchanged_with_its_readings_warned(tmp_path):
    r = run([YARD_EVE, "build", listing(PROGRAM2), "-o", tmp_path / "program2"])
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    for w in PROGRAM2_WARNINGS:
        assert f"{PROGRAM2}{w}" in err, (w, err)
    assert "error" not in err.replace("'error'", "").replace("error&", ""), err
    assert len(err.splitlines()) == len(PROGRAM2_WARNINGS), err


@pytest.fixture
def program2(tmp_path):
    exe = tmp_path / "program2"
    r = run([YARD_EVE, "build", listing(PROGRAM2), "-o", exe])
    assert r.returncode == 0, r.stderr
    taken = port_taken(PORT)
    if taken:
        pytest.skip(taken)
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "YARD_EVE_WORKERS": "2"})
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()


@ON_PORT
def test_program2_broadcasts_to_every_client_and_drops_who_leaves(program2):
    # One client after another: each says a line and waits to hear it back,
    # which shows that the server has taken it into `clients` (the sender
    # hears its own lines); those before it hear that line too.
    clients, readers = [], []
    for i in range(3):
        c = connect_when_listening(program2)
        clients.append(c)
        readers.append(Reader(c))
        hello = f"hello from {i}\n".encode()
        c.sendall(hello)
        for r in readers:
            r.expect(hello)
    # every line to every client, the sender included, one sender after another
    for round_ in range(3):
        for i, c in enumerate(clients):
            line = f"line {round_} from {i}: {'x' * (round_ * 40)}\n".encode()
            c.sendall(line)
            for r in readers:
                r.expect(line)
    for r in readers:
        r.quiet()
    # a client that leaves is removed: the others go on hearing each other, and
    # the server neither fails writing to it nor ends
    assert wait_sockets(program2.pid, 1 + 3) == 1 + 3  # the listener and three connections
    clients[2].close()
    # the server sees the close (its socket for that client goes; the close
    # callback that removes the client from `clients` runs right after)
    assert wait_sockets(program2.pid, 1 + 2) == 1 + 2
    for i in (0, 1):
        line = f"after the leave, from {i}\n".encode()
        clients[i].sendall(line)
        for r in readers[:2]:
            r.expect(line)
    assert program2.poll() is None
    # a newcomer is heard and hears, the one who left is not written to
    late = Reader(connect_when_listening(program2))
    line = b"late joiner\n"
    late.sock.sendall(line)
    for r in (readers[0], readers[1], late):
        r.expect(line)
    # SIGTERM ends it cleanly: status 0, promptly, nothing on stderr
    t0 = time.monotonic()
    program2.send_signal(signal.SIGTERM)
    assert program2.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 2.5
    assert program2.stderr.read() == b""
    for c in clients[:2] + [late.sock]:
        c.close()


@ON_PORT
def test_program2_reports_a_taken_port_through_its_error_handler(tmp_path):
    exe = tmp_path / "program2"
    r = run([YARD_EVE, "build", listing(PROGRAM2), "-o", exe])
    assert r.returncode == 0, r.stderr
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("0.0.0.0", PORT))
    except OSError as e:
        holder.close()
        pytest.skip(f"port {PORT} is taken here by another program ({e.strerror}): this test takes it itself")
    holder.listen(1)
    try:
        p = run([exe], timeout=20)
    finally:
        holder.close()
    # the error handler writes its message with the reason, and the program,
    # with nothing left to do, ends
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith(b"Failed to start server: "), p.stderr
    assert b"8080" in p.stderr and b"in use" in p.stderr, p.stderr
