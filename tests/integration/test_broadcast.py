"""The peers' broadcast chat (`--app broadcast`, docs/peers.md): every line a client sends
(its bytes up to and including '\\n') reaches every other client unchanged and in order, never
its sender; a partial line waits for its '\\n'; a client that leaves is removed; a line over
64 KiB closes its sender; a client that does not read is disconnected once 1 MiB waits for it;
SIGTERM exits 0 at once. Every wait is on a condition, with a timeout."""

from __future__ import annotations

import random
import select
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import server_has_read, wait_for
from test_peers import peer_argv

PEERS = ["go", "node", "erlang", "elixir", "rust-tokio"]
MAX_LINE = 64 * 1024
MAX_QUEUED = 1024 * 1024


@pytest.fixture(params=PEERS)
def chat(request, start_server):
    """A started broadcast server of each peer (skipped, with the reason, without its
    toolchain)."""
    return start_server(peer_argv(request.param, "broadcast"))


class Client:
    """A chat client: a socket and what it has received so far."""

    def __init__(self, srv, rcvbuf: int | None = None):
        self.s = socket.socket(srv.family, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(10)
        self.s.connect(srv.addr)
        self.got = b""
        self.eof = False

    def send(self, data: bytes) -> None:
        self.s.sendall(data)

    def poll(self, wait: float = 0.0) -> bytes:
        """Takes what has arrived, waiting at most `wait` for something."""
        while not self.eof and select.select([self.s], [], [], wait)[0]:
            try:
                c = self.s.recv(1 << 20)
            except ConnectionResetError:
                c = b""
            if not c:
                self.eof = True
            self.got += c
            wait = 0.0
        return self.got

    def wait_for(self, n: int, timeout: float = 10.0, what: str = "") -> bytes:
        """Waits until at least n bytes have arrived; returns them all."""
        deadline = time.monotonic() + timeout
        while len(self.got) < n and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.poll(min(left, 0.5))
        assert len(self.got) >= n, (f"{what}: {len(self.got)} of {n} bytes after {timeout}s"
                                    f"{' and EOF' if self.eof else ''}; got {self.got[-200:]!r}")
        return self.got

    def take(self, n: int, what: str = "") -> bytes:
        data = self.wait_for(n, what=what)
        out, self.got = data[:n], data[n:]
        return out

    def wait_closed(self, what: str, timeout: float = 10.0) -> None:
        """Waits until the server has closed this connection (what came before stays in got)."""
        wait_for(lambda: self.poll(0.05) is not None and self.eof, timeout, what)

    def close(self, abort: bool = False) -> None:
        if abort:  # a reset rather than a FIN
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.s.close()


def sync(speaker: Client, others: list[Client], timeout: float = 10.0) -> None:
    """Returns when speaker and others are all in the room, with nothing in flight. Joining
    is asynchronous, so the speaker says `sync K` every 20 ms until every other client has
    heard one; it then stops, and each reads up to its last K (a sender's lines arrive in
    order, so nothing of it is still on the way). The speaker's lines reaching the others
    shows it is in the room too: every peer puts a client in the room before reading it."""
    k, deadline = 0, time.monotonic() + timeout
    while not all(b"sync " in c.poll() for c in others):
        assert time.monotonic() < deadline, "the clients did not all join the room"
        speaker.send(b"sync %d\n" % k)
        k += 1
        for c in others:
            c.poll(0.02 / len(others))
    last = b"sync %d\n" % (k - 1)
    for c in others:
        wait_for(lambda c=c: c.poll(0.05).endswith(last), 10, "the last sync line")
        assert all(ln.startswith(b"sync ") for ln in c.got.splitlines()), c.got
        c.got = b""
    assert speaker.poll() == b"", "the speaker heard its own lines"


def join(srv, n: int, rcvbuf: int | None = None) -> list[Client]:
    """n new clients, all in the room (the first with that receive buffer), nothing in
    flight."""
    cs = [Client(srv, rcvbuf)] + [Client(srv) for _ in range(n - 1)]
    sync(cs[-1], cs[:-1])
    return cs


def assert_alive(srv) -> None:
    assert srv.proc.poll() is None, f"the server exited ({srv.proc.returncode}): {srv.stderr()}"


def marker_only(c: Client, marker: bytes) -> None:
    """c receives marker and had received nothing before it."""
    assert c.take(len(marker), "the marker line") == marker


# ---- the tests ----------------------------------------------------------------

def test_lines_reach_every_other_client_in_order_never_the_sender(chat):
    a, b, c = join(chat, 3)
    rng = random.Random(23)
    lines = [b"line %d %s\n" % (i, b"x" * rng.randrange(0, 3000)) for i in range(300)]
    stream = b"".join(lines)
    # Sent in pieces cut anywhere, lines split across sends and several in one send.
    i = 0
    while i < len(stream):
        j = min(len(stream), i + rng.choice([1, 7, 100, 4096, 20000]))
        a.send(stream[i:j])
        i = j
    assert b.take(len(stream), "B: A's lines") == stream
    assert c.take(len(stream), "C: A's lines") == stream
    # A hears C's marker and nothing before it: not one of its own lines.
    c.send(b"from C\n")
    marker_only(a, b"from C\n")
    assert b.take(7) == b"from C\n"
    assert a.poll() == b"" and b.poll() == b"" and c.poll() == b""


def test_each_senders_lines_stay_whole_and_in_order(chat):
    cs = join(chat, 3)
    sent = {i: [b"%d:%d:%s\n" % (i, k, b"y" * (k % 97)) for k in range(200)] for i in range(3)}
    for k in range(200):  # the three talk at once, their sends interleaved
        for i, c in enumerate(cs):
            c.send(sent[i][k])
    for i, c in enumerate(cs):
        want = sum(len(ln) for j in range(3) if j != i for ln in sent[j])
        got = c.take(want, f"client {i}").splitlines(keepends=True)
        for j in range(3):
            mine = [ln for ln in got if ln.startswith(b"%d:" % j)]
            assert mine == ([] if j == i else sent[j]), (i, j)


def test_a_partial_line_waits_for_its_newline(chat):
    a, b, c = join(chat, 3)
    a.send("half a lí".encode())
    wait_for(lambda: server_has_read(a.s), 5, "the server to read A's partial line")
    c.send(b"meanwhile\n")
    marker_only(b, b"meanwhile\n")   # nothing of A's partial line before it
    a.send("ne, 🎉 then the rest".encode())
    wait_for(lambda: server_has_read(a.s), 5, "the server to read A's second piece")
    c.send(b"still waiting\n")
    marker_only(b, b"still waiting\n")
    a.send(b"\n")
    whole = "half a líne, 🎉 then the rest\n".encode()
    assert b.take(len(whole)) == whole
    assert c.take(len(whole)) == whole


def test_any_bytes_arrive_unchanged(chat):
    a, b, c = join(chat, 3)
    text = "Grüße, Здравствуйте, こんにちは, مرحبا, שלום, 你好 👋🏽🎉👨‍👩‍👧 \u200d\ufeff".encode()
    raw = bytes(x for x in range(256) if x != 0x0A)   # NUL, CR, 0xff, invalid UTF-8...
    lines = [text + b"\n", raw + b"\n", b"\n", b"\r\n", b"\xf0\x9f\x8e\n", b"\x80" * 5000 + b"\n"]
    stream = b"".join(lines)
    for k in range(0, len(stream), 3):   # and an emoji's bytes in separate sends
        a.send(stream[k:k + 3])
    assert b.take(len(stream)) == stream
    assert c.take(len(stream)) == stream


@pytest.mark.parametrize("abort", [False, True], ids=["close", "reset"])
def test_a_client_that_leaves_is_removed(chat, abort):
    a, b, c = join(chat, 3)
    a.send(b"one\n")
    assert b.take(4) == b"one\n" and c.take(4) == b"one\n"
    b.close(abort)
    for k in range(50):   # some of these may be sent to B before the server sees it leave
        a.send(b"after %d\n" % k)
    want = b"".join(b"after %d\n" % k for k in range(50))
    assert c.take(len(want), "C: A's lines after B left") == want
    assert_alive(chat)
    # The room still works, for a client that joins now too.
    d = Client(chat)
    sync(d, [a, c])
    a.send(b"welcome D\n")
    assert d.take(10) == b"welcome D\n" and c.take(10) == b"welcome D\n"
    assert_alive(chat)


def test_a_line_of_64_kib_passes_a_longer_one_closes_its_sender(chat):
    a, b, c = join(chat, 3)
    longest = b"L" * (MAX_LINE - 1) + b"\n"
    a.send(longest)
    assert b.take(len(longest)) == longest and c.take(len(longest)) == longest
    # One byte more: a line before it in the same send still goes, then A is closed.
    a.send(b"short\n" + b"M" * MAX_LINE + b"\n" + b"never\n")
    a.wait_closed("A to be disconnected")
    assert a.got == b""
    c.send(b"marker\n")
    assert b.take(len(b"short\nmarker\n")) == b"short\nmarker\n"
    assert_alive(chat)
    # A partial line that has reached 64 KiB cannot end in time: its sender is closed too.
    d = Client(chat)
    d.send(b"P" * MAX_LINE)
    d.wait_closed("D to be disconnected")
    c.send(b"marker 2\n")
    assert b.take(len(b"marker 2\n")) == b"marker 2\n"
    assert_alive(chat)


def test_a_client_that_does_not_read_is_disconnected(chat):
    """D never reads (and has a small receive buffer); A sends 16 MiB in 64 KiB lines, a
    batch at a time, each read by B before the next. B gets everything; D is closed once
    about 1 MiB waits for it in the server (plus what the kernel's buffers hold), and what it
    had received is the start of A's lines."""
    d, a, b = join(chat, 3, rcvbuf=16 * 1024)
    line = b"D" * (MAX_LINE - 1) + b"\n"
    batch = 8
    for _ in range(256 // batch):
        a.send(line * batch)
        assert b.take(len(line) * batch, "B: a batch") == line * batch
    assert_alive(chat)
    got = b""
    deadline = time.monotonic() + 20
    while not d.eof:   # D reads now: what was queued for it, then the end
        assert time.monotonic() < deadline, "D was never disconnected"
        d.poll(0.5)
        got, d.got = got + d.got, b""
    assert len(got) < len(line) * 256, "D received everything: it was not disconnected"
    assert (line * 256).startswith(got), "D's bytes are not the start of A's lines"
    a.send(b"still here\n")
    assert b.take(11) == b"still here\n"
    assert_alive(chat)


def test_sigterm_exits_0_within_2s_with_clients_connected(chat):
    a, b, c = join(chat, 3)
    a.send(b"partial")
    b.send(b"hello\n")
    a.take(6)
    t = time.monotonic()
    assert chat.stop(signal.SIGTERM, timeout=5) == 0, chat.stderr()
    assert time.monotonic() - t < 2.0
    wait_for(lambda: not chat.group_alive(), 3, "every process of the group to exit")


def test_node_cluster_refuses_broadcast():
    argv = [str(x) for x in peer_argv("node-cluster", "broadcast")]
    r = subprocess.run(argv, capture_output=True, timeout=30)
    assert r.returncode == 2 and b"--cluster" in r.stderr, r.stderr
