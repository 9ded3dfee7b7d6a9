"""counter under every model: exact counts, monotonic replies."""

import struct
import threading

import pytest

from conftest import EVE, PEERS, models, recv_exactly, recv_until_closed, wait_for

READ, INCR = b"\x00", b"\x01"


def values(raw: bytes) -> list[int]:
    assert len(raw) % 8 == 0
    return [v for (v,) in struct.iter_unpack(">Q", raw)]


def read_counter(server) -> int:
    with server.connect() as s:
        s.sendall(READ)
        return values(recv_exactly(s, 8))[0]


SYNC = ["atomic", "perms"]
# Our models in both sync modes; the peers have their own single design.
VARIANTS = [(m, s) for m in models() for s in SYNC] + [(p, None) for p in PEERS + EVE]


def start_counter(serve, model, sync):
    return serve("counter", model, *(["--counter-sync", sync] if sync else []))


@pytest.mark.parametrize("model, sync", VARIANTS)
def test_counter_8_clients_10000_increments(serve, model, sync):
    server = start_counter(serve, model, sync)
    assert read_counter(server) == 0
    clients, per_client, batch = 8, 10_000, 100
    replies: list[list[int]] = [[] for _ in range(clients)]
    failures = []

    def client(i):
        try:
            with server.connect(timeout=30) as s:
                for _ in range(per_client // batch):
                    s.sendall(INCR * batch)
                    replies[i].extend(values(recv_exactly(s, 8 * batch)))
        except Exception as e:
            failures.append((i, e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    assert read_counter(server) == clients * per_client
    everything = []
    for i, r in enumerate(replies):
        assert len(r) == per_client
        assert all(a < b for a, b in zip(r, r[1:])), f"client {i}: replies not strictly increasing"
        everything.extend(r)
    # Every increment got a distinct value: together they are exactly 1..80000.
    assert sorted(everything) == list(range(1, clients * per_client + 1))


@pytest.mark.parametrize("model, sync", VARIANTS)
def test_counter_reads_do_not_change_it(serve, model, sync):
    server = start_counter(serve, model, sync)
    with server.connect() as s:
        s.sendall(INCR * 3 + READ * 5 + INCR)
        assert values(recv_exactly(s, 9 * 8)) == [1, 2, 3, 3, 3, 3, 3, 3, 4]


@pytest.mark.parametrize("model, sync", VARIANTS)
def test_counter_bad_byte_closes_only_that_connection(serve, model, sync):
    server = start_counter(serve, model, sync)
    good = server.connect()
    good.sendall(INCR)
    assert values(recv_exactly(good, 8)) == [1]
    bad = server.connect()
    bad.sendall(INCR + b"\x07" + INCR)
    # The request before the bad byte is answered, then the connection ends.
    assert values(recv_until_closed(bad)) == [2]
    bad.close()
    good.sendall(INCR)
    assert values(recv_exactly(good, 8)) == [3]
    good.close()
    if model not in PEERS + EVE:  # the peers log in their own words
        wait_for(lambda: "unknown request byte" in server.stderr(), what="the close is logged")


@pytest.mark.models()
def test_counter_perms_mixed_readers_and_writers(serve, model):
    """Readers and writers interleaved across connections: every read sees a
    value no greater than the increments done so far, reads never go back,
    and the final count is exact."""
    server = serve("counter", model, "--counter-sync", "perms")
    clients, rounds = 6, 300
    seen: list[list[int]] = [[] for _ in range(clients)]
    failures = []

    def client(i):
        try:
            with server.connect(timeout=30) as s:
                for r in range(rounds):
                    op = INCR if (i + r) % 2 else READ
                    s.sendall(op * 10)
                    seen[i].extend(values(recv_exactly(s, 80)))
        except Exception as e:
            failures.append((i, e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    increments = sum(10 for i in range(clients) for r in range(rounds) if (i + r) % 2)
    assert read_counter(server) == increments
    for i, v in enumerate(seen):
        assert all(a <= b for a, b in zip(v, v[1:])), f"client {i} saw the count go back"
        assert max(v) <= increments
