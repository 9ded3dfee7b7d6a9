"""yard-baseline-echo (bench/baseline/epoll_echo.c), the hand-written
yardstick the engine is measured against: byte-exact as an echo server and,
with --sink FILE, as a sink whose file holds exactly what was sent."""

import socket
import subprocess

from conftest import BIN, recv_exactly, wait_for

BASELINE = BIN / "yard-baseline-echo"


def test_echo_is_byte_exact(start_server):
    srv = start_server([BASELINE, "127.0.0.1:0"])
    payload = bytes(range(256)) * 512  # 128 KiB: more than one read
    with socket.create_connection(srv.addr, timeout=10) as s:
        s.sendall(payload)
        assert recv_exactly(s, len(payload)) == payload
    assert srv.stop() == 0


def test_sink_file_holds_every_byte(start_server, tmp_path):
    out = tmp_path / "sink.out"
    srv = start_server([BASELINE, "127.0.0.1:0", "--sink", out])
    sent = b""
    conns = [socket.create_connection(srv.addr, timeout=10) for _ in range(3)]
    # Three open connections, each sending once the file holds the last one's bytes: the
    # sink writes each read as it comes, so bytes sent at once may interleave anywhere, even
    # inside a line, and only a file written one connection after another can be compared
    # byte for byte.
    for i, s in enumerate(conns):
        chunk = (b"connection %d, \xe2\x9c\x93 \xf0\x9f\x98\x80\n" % i) * 4000
        s.sendall(chunk)
        sent += chunk
        wait_for(lambda: out.stat().st_size == len(sent), timeout=10,
                 what=f"connection {i}'s bytes in the file")
    for s in conns:
        s.close()
    assert out.read_bytes() == sent
    assert srv.stop() == 0


def test_usage_errors_exit_2():
    for args in ([], ["127.0.0.1:0", "--sink"], ["127.0.0.1:0", "--bogus", "x"], ["nocolon"]):
        r = subprocess.run([str(BASELINE), *args], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, args
        assert "usage: yard-baseline-echo IPV4:PORT [--sink FILE]" in r.stderr
