"""yard-load --tls for the counter and rate modes against yard-serve's --tls-listen
(docs/load.md, docs/tls.md): the counts and bytes exact over TLS, one full handshake
per measured connection, and a plain port refused."""

import json
import subprocess

import pytest

from conftest import BIN, model_args, skip_unavailable, wait_for
from tlslib import tls_args, tls_connect


def start(start_server, app, model, pki, *flags):
    skip_unavailable(model)
    return start_server([BIN / "yard-serve", "--app", app, *model_args(model), "--listen",
                         "127.0.0.1:0", *tls_args(pki), *flags])


def yard_load(*args, timeout=60):
    return subprocess.run([str(BIN / "yard-load"), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def count_over_tls(srv, pki) -> int:
    with tls_connect(srv.tls_addrs[0], pki) as s:
        s.sendall(b"\x00")
        got = b""
        while len(got) < 8:
            b = s.recv(8 - len(got))
            assert b, "closed before the count"
            got += b
    return int.from_bytes(got, "big")


@pytest.mark.models(names=["epoll", "thread", "coro", "uring"])
def test_counter_over_tls_is_exact(start_server, pki, model):
    srv = start(start_server, "counter", model, pki)
    target = "127.0.0.1:%d" % srv.tls_addrs[0][1]
    r = yard_load("counter", "--target", target, "--tls", "--tls-ca", pki.ca, "--connections", 8,
                  "--messages", 250, "--read-ratio", 0.3, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["messages"] == 8 * 250 and d["errors"] == 0, d["first_error"]
    assert d["bytes_sent"] == 8 * 250 and d["bytes_received"] == 8 * 250 * 8
    assert d["count_initial"] == 0 and d["count_final"] == d["increments"] > 0
    # The reads of the count around the run speak TLS but are not the run's handshakes.
    t = d["tls"]
    assert t["full_handshakes"] == 8 and t["resumed_handshakes"] == 0 and t["failures"] == 0, t
    assert count_over_tls(srv, pki) == d["count_final"]
    # Pipelined, over two threads, from a count that is not 0: still exact.
    r = yard_load("counter", "--target", "tls:" + target, "--tls-ca", pki.ca, "--connections", 6,
                  "--threads", 2, "--pipeline", 4, "--messages", 300, "--read-ratio", 0,
                  "--json")
    assert r.returncode == 0, r.stderr
    d2 = json.loads(r.stdout)
    assert d2["errors"] == 0 and d2["increments"] == 6 * 300
    assert d2["count_initial"] == d["count_final"]
    assert d2["count_final"] == d["count_final"] + 6 * 300 == count_over_tls(srv, pki)
    assert d2["tls"]["full_handshakes"] == 6


def test_counter_over_tls_refuses_a_plain_port(start_server, pki):
    srv = start(start_server, "counter", "epoll", pki)
    r = yard_load("counter", "--target", "127.0.0.1:%d" % srv.port, "--tls", "--tls-insecure",
                  "--messages", 5)
    assert r.returncode == 1 and "TLS" in r.stderr, r.stderr


@pytest.mark.models(names=["epoll", "thread", "coro", "uring"])
def test_rate_over_tls_delivers_every_byte_to_a_sink(start_server, pki, model, tmp_path):
    out = tmp_path / "sink.out"
    srv = start(start_server, "sink", model, pki, "--out", out)
    target = "127.0.0.1:%d" % srv.tls_addrs[0][1]
    r = yard_load("rate", "--target", target, "--tls", "--tls-ca", pki.ca, "--connections", 8,
                  "--bandwidth", "200kbps", "--duration", "1s", "--ramp-up", "200ms",
                  "--message", "abcdefgh\\n", "--json", timeout=30)
    # With --json an error is in the report (errors, first_error), not on stderr.
    d = json.loads(r.stdout) if r.stdout.strip() else {}
    assert r.returncode == 0, (r.stderr, d.get("first_error"), d.get("tls"))
    assert d["errors"] == 0, d["first_error"]
    t = d["tls"]
    assert t["full_handshakes"] == 8 and t["resumed_handshakes"] == 0 and t["failures"] == 0, t
    # 8 x 200 kbit/s for 1 s, in whole messages of 9 bytes.
    assert d["achieved_rate"] > 0.5 * 8 * 200e3, d["achieved_rate"]  # exact below; not a timing test
    # Every plaintext byte sent reached the sink's file, opened exactly.
    wait_for(lambda: out.stat().st_size == d["bytes_sent"], timeout=10,
             what=f"{d['bytes_sent']} bytes in the sink's file")
    data = out.read_bytes()
    assert d["bytes_sent"] % 9 == 0
    for ch in b"abcdefgh\n":
        assert data.count(bytes([ch])) == d["bytes_sent"] // 9, chr(ch)


def test_rate_over_tls_refuses_a_plain_port(start_server, pki):
    srv = start(start_server, "echo", "epoll", pki)
    r = yard_load("rate", "--target", "127.0.0.1:%d" % srv.port, "--tls", "--tls-insecure",
                  "--connections", 2, "--bandwidth", "100kbps", "--duration", "500ms",
                  "--ramp-up", "0s", timeout=30)
    assert r.returncode == 1 and "TLS" in r.stderr, r.stderr
