"""sink under every model and both flush modes: the file holds exactly the
bytes sent, each connection's lines whole and in order."""

import subprocess
import threading

import pytest

from conftest import BIN, SERVERS, server_has_read, wait_for


def line(conn: int, seq: int) -> bytes:
    return f"conn {conn:02d} line {seq:06d} {'x' * (seq % 50)}\n".encode()


def send_concurrently(server, payloads: dict[int, bytes]) -> None:
    def client(c):
        with server.connect() as s:
            data = payloads[c]
            # Odd-sized pieces so lines and chunks straddle reads.
            for off in range(0, len(data), 777):
                s.sendall(data[off:off + 777])

    threads = [threading.Thread(target=client, args=(c,)) for c in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


@pytest.mark.parametrize("flush", ["each", "buffered"])
@pytest.mark.parametrize("model", SERVERS)
def test_sink_writes_exactly_what_was_sent(serve, model, flush, tmp_path):
    """The sink protocol: every byte of every connection reaches the file,
    each connection's bytes in order. Each connection sends from its own
    16-value alphabet, so its stream can be picked out of the file however
    the server chunked its writes."""
    out = tmp_path / "sink.out"
    server = serve("sink", model, "--out", out, "--flush", flush)
    conns, n = 8, 60000
    payloads = {c: bytes(c * 16 + (i * 7 + i // 16) % 16 for i in range(n)) for c in range(conns)}
    send_concurrently(server, payloads)
    total = conns * n
    wait_for(lambda: out.exists() and out.stat().st_size >= total, timeout=30,
             what=f"{total} bytes in {out}")
    assert server.stop() == 0
    content = out.read_bytes()
    assert len(content) == total
    for c in range(conns):
        mine = bytes(b for b in content if b // 16 == c)
        assert mine == payloads[c], f"connection {c}'s bytes differ"


@pytest.mark.parametrize("flush", ["each", "buffered"])
@pytest.mark.models()
def test_sink_keeps_lines_whole(serve, model, flush, tmp_path):
    """Our sink's extra promise: a line is never split between two writes,
    so the file is an interleaving of the connections' whole lines."""
    out = tmp_path / "sink.out"
    server = serve("sink", model, "--out", out, "--flush", flush)
    conns, lines = 8, 3000
    expected = {c: b"".join(line(c, i) for i in range(lines)) for c in range(conns)}
    send_concurrently(server, expected)
    total = sum(len(v) for v in expected.values())
    wait_for(lambda: out.exists() and out.stat().st_size >= total, timeout=30,
             what=f"{total} bytes in {out}")
    assert server.stop() == 0
    content = out.read_bytes()
    assert len(content) == total
    by_conn: dict[int, list[bytes]] = {c: [] for c in range(conns)}
    for ln in content.splitlines(keepends=True):
        by_conn[int(ln.split()[1])].append(ln)
    for c in range(conns):
        assert b"".join(by_conn[c]) == expected[c], f"connection {c}'s lines differ"


@pytest.mark.parametrize("model", SERVERS)
def test_sink_keeps_unterminated_tail_and_flushes_on_sigterm(serve, model, tmp_path):
    """A last line without a newline is still written, and bytes held in a
    --flush buffered buffer reach the file when the server is stopped with
    the connection still open."""
    out = tmp_path / "sink.out"
    server = serve("sink", model, "--out", out, "--flush", "buffered")
    closed = b"first line\nno newline at the end"
    with server.connect() as s:
        s.sendall(closed)
    wait_for(lambda: out.stat().st_size >= len(closed), what="closed connection flushed")
    still_open = server.connect()
    still_open.sendall(b"still open\n")
    wait_for(lambda: server_has_read(still_open), what="server read the open connection's line")
    assert out.read_bytes() == closed  # the open connection's line is still buffered
    assert server.stop() == 0
    still_open.close()
    assert out.read_bytes() == closed + b"still open\n"


def test_sink_unwritable_out_is_a_clear_error(serve, tmp_path):
    r = subprocess.run([BIN / "yard-serve", "--app", "sink", "--model", "epoll", "--listen",
                        "127.0.0.1:0", "--out", tmp_path / "no" / "such" / "dir"],
                       capture_output=True, timeout=10)
    assert r.returncode == 1
    assert b"cannot open --out" in r.stderr
