"""The chat app under every model: logging in, fan-out to every member in one
order, offline catch-up, bad input, crash safety of the log."""

import base64
import socket
import os
import signal
import subprocess
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest

from chatlib import CHAT, Irc, add_accounts, chat_starter, login_pass, login_sasl
from conftest import BIN

pytestmark = pytest.mark.usefixtures("yard_chat_built")

NUSERS = 50
# The tests under every model run fork-pair too (extra=["fork-pair"]): the
# chat app as papayaChat ran it, a RECV and a SEND process per client.


@pytest.fixture(scope="module")
def accounts(tmp_path_factory):
    """A data directory holding NUSERS accounts (u0..u49, password pw-<name>)."""
    d = tmp_path_factory.mktemp("accounts")
    add_accounts(d, (f"u{i}" for i in range(NUSERS)))
    return d


@pytest.fixture
def chat(start_server, accounts, tmp_path):
    """chat(model, *flags, data=None) -> (server, data dir)."""
    return chat_starter(start_server, accounts, tmp_path)


@pytest.mark.models(extra=["fork-pair"])
def test_login_with_pass_and_sasl(chat, model):
    srv, _ = chat(model)
    a = login_pass(srv.port, "u1", "pw-u1")
    a.expect(r" 005 u1 .*CASEMAPPING=rfc1459")
    b = login_sasl(srv.port, "U2", "pw-u2")   # the account's own spelling is used
    b.expect(r" 422 u2 ")
    # The sender is the account, never what the client claims as its source.
    a.send("JOIN #t")
    a.expect(r"JOIN #t")
    b.send("JOIN #t")
    b.expect(r" 366 ")
    a.send(":mallory!m@evil PRIVMSG #t :hi")
    b.expect(r"^:u1!u1@yard PRIVMSG #t :hi$")
    a.close()
    b.close()


def test_bad_logins_are_refused_and_slowed(chat):
    srv, _ = chat("epoll")
    c = Irc(srv.port)
    c.send("PASS wrong", "NICK u3", "USER u3 0 * :x")
    c.expect(r" 464 u3 :Password incorrect", timeout=15)
    assert c.wait_closed()
    c = Irc(srv.port)
    c.send("PASS x", "NICK nosuchuser", "USER n 0 * :x")
    c.expect(r" 464 ", timeout=15)
    assert c.wait_closed()
    # No credentials at all.
    c = Irc(srv.port)
    c.send("NICK u3", "USER u3 0 * :x")
    c.expect(r" 464 .*Password required")
    assert c.wait_closed()
    # SASL failure, then success on the same connection.
    c = Irc(srv.port)
    c.send("CAP LS", "NICK u3", "USER u3 0 * :x", "CAP REQ :sasl", "AUTHENTICATE PLAIN")
    c.expect(r"^AUTHENTICATE \+")
    c.send("AUTHENTICATE " + base64.b64encode(b"\0u3\0nope").decode())
    c.expect(r" 904 ", timeout=15)
    c.send("AUTHENTICATE PLAIN")
    c.expect(r"^AUTHENTICATE \+")
    c.send("AUTHENTICATE " + base64.b64encode(b"\0u3\0pw-u3").decode())
    c.expect(r" 903 ")
    c.send("CAP END")
    c.expect(r" 001 u3 ")
    # Malformed SASL payloads.
    d = Irc(srv.port)
    d.send("CAP REQ :sasl", "AUTHENTICATE PLAIN")
    d.expect(r"^AUTHENTICATE \+")
    d.send("AUTHENTICATE !!!notbase64")
    d.expect(r" 904 .*malformed")


def test_commands_before_login_and_bad_input(chat):
    srv, _ = chat("epoll", "--registration-timeout-ms", "1500")
    c = Irc(srv.port)
    c.send("JOIN #x")
    c.expect(r" 451 \* JOIN :You have not registered")
    c.send("FOO bar")
    c.expect(r" 451 \* FOO ")
    c = login_pass(srv.port, "u4", "pw-u4")
    c.send("FROB x")
    c.expect(r" 421 u4 FROB :Unknown command")
    c.send("PRIVMSG #nochan :x")
    c.expect(r" 403 u4 #nochan ")
    c.send("JOIN #a", "PRIVMSG #a :" + "x" * 600)
    c.expect(r" 417 u4 :Input line was too long")
    c.send("PING still-here")
    c.expect(r"PONG yard :still-here")
    # A line with a NUL byte, and bytes that are not UTF-8, framed correctly.
    c.sock.sendall(b"PRIVMSG #a :a\x00b\r\nPRIVMSG #a :\xff\xfe ok\r\nPING after\r\n")
    c.expect(r" 421 .*NUL")
    c.expect(r"PONG yard :after")
    # Registration timeout for a silent client.
    s = Irc(srv.port)
    s.expect(r"^ERROR :Closing Link: registration timed out", timeout=10)
    assert s.wait_closed()


@pytest.mark.models(extra=["fork-pair"])
def test_fan_out_50_clients_3_channels(chat, model):
    """50 clients in 3 channels, each sends 200 messages: every member gets
    every message of its channel exactly once, all in the same order, with the
    account as the sender."""
    srv, _ = chat(model)
    chans = ["#a", "#b", "#c"]
    users = [f"u{i}" for i in range(NUSERS)]
    chan_of = {u: chans[i % 3] for i, u in enumerate(users)}
    clients = {}
    for u in users:
        c = login_pass(srv.port, u, f"pw-{u}", timeout=60)
        c.send(f"JOIN {chan_of[u]}")
        c.expect(r" 366 ")
        clients[u] = c
    members = defaultdict(list)
    for u in users:
        members[chan_of[u]].append(u)
    per = 200

    def blast(u):
        c = clients[u]
        lines = [f"PRIVMSG {chan_of[u]} :{u} says {k}" for k in range(per)]
        for i in range(0, per, 50):
            c.send(*lines[i:i + 50])

    with ThreadPoolExecutor(16) as ex:
        list(ex.map(blast, users))
    orders = {}

    def receive(u):
        ch = chan_of[u]
        others = len(members[ch]) - 1
        got = clients[u].collect(rf"^:(\S+)!\S+ PRIVMSG {ch} :(\S+) says (\d+)$", others * per,
                                 timeout=120)
        return u, [(m.group(1), m.group(2), int(m.group(3))) for m in got]

    with ThreadPoolExecutor(16) as ex:
        for u, msgs in ex.map(receive, users):
            # The sender is the account, and the text says the same.
            assert all(src == who for src, who, _ in msgs)
            # Exactly once, every message of every other member.
            seen = {(w, k) for _, w, k in msgs}
            assert len(seen) == len(msgs)
            expected = {(w, k) for w in members[chan_of[u]] if w != u for k in range(per)}
            assert seen == expected
            orders[u] = msgs
    # One order for everyone: any two members agree on the order of the
    # messages both received.
    for ch in chans:
        ref = {m: i for i, m in enumerate(orders[members[ch][0]])}
        for u in members[ch][1:]:
            common = [m for m in orders[u] if m in ref]
            assert [ref[m] for m in common] == sorted(ref[m] for m in common), (ch, u)
    for c in clients.values():
        c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_offline_catch_up(chat, model):
    srv, _ = chat(model)
    a = login_pass(srv.port, "u5", "pw-u5")
    a.send("JOIN #news")
    a.expect(r" 366 ")
    a.send("QUIT :bye")
    a.expect(r"^ERROR ")
    assert a.wait_closed()
    b = login_pass(srv.port, "u6", "pw-u6")
    b.send("JOIN #news")
    b.expect(r" 366 ")
    b.send(*[f"PRIVMSG #news :missed {k}" for k in range(100)])
    b.send("PING done")
    b.expect(r"PONG yard :done")
    a = login_sasl(srv.port, "u5", "pw-u5", caps="sasl server-time")
    a.send("JOIN #news")
    a.expect(r" 366 ")
    got = a.collect(r"^@time=\S+ :u6!u6@yard PRIVMSG #news :missed (\d+)$", 100)
    assert [int(m.group(1)) for m in got] == list(range(100))
    # Then live traffic, and nothing replayed twice.
    b.send("PRIVMSG #news :live one")
    a.expect(r"PRIVMSG #news :live one$")
    assert sum("missed" in line for line in a.lines) == 100


def test_echo_message_and_private_messages(chat):
    srv, _ = chat("epoll")
    a = login_sasl(srv.port, "u7", "pw-u7", caps="sasl echo-message")
    b = login_pass(srv.port, "u8", "pw-u8")
    a.send("PRIVMSG u8 :direct", "PRIVMSG nobody :x")
    b.expect(r"^:u7!u7@yard PRIVMSG u8 :direct$")
    a.expect(r" 401 u7 nobody ")                     # answered at once
    a.expect(r"^:u7!u7@yard PRIVMSG u8 :direct$")   # echo-message: the sender sees it too
    a.send("JOIN #e", "TOPIC #e :the topic", "NAMES #e", "WHO #e")
    a.expect(r" 353 u7 = #e :@u7$")   # its creator: the operator
    a.expect(r" 352 u7 #e u7 ")
    # The change comes back through the log, after the replies.
    a.expect(r"^:u7!u7@yard TOPIC #e :the topic$")
    b.send("JOIN #e")
    b.expect(r" 332 u8 #e :the topic")
    b.send("PART #e :gone")
    b.expect(r"PART #e :gone")
    b.send("PRIVMSG #e :after part")
    b.expect(r" 404 u8 #e ")


@pytest.mark.models(extra=["fork-pair"])
def test_crash_safety_with_fsync_always(chat, model, tmp_path):
    """kill -9 the whole server while clients send; after a restart every
    message echoed back to its sender is in the log exactly once, and the log
    verifies."""
    srv, data = chat(model, "--fsync", "always")
    clients = [login_sasl(srv.port, f"u{i}", f"pw-u{i}", caps="sasl echo-message")
               for i in range(10, 14)]
    for c in clients:
        c.send("JOIN #crash")
        c.expect(r" 366 ")
    for c in clients:
        c.send(*[f"PRIVMSG #crash :m{k}" for k in range(300)])
    # Each sender sees its own first 50 messages come back, then the kill.
    for i, c in enumerate(clients):
        c.collect(rf"^:u{10 + i}!\S+ PRIVMSG #crash :m\d+$", 50)
    os.killpg(srv.pgid, signal.SIGKILL)
    srv.proc.wait(10)
    echoed = {}
    for i, c in enumerate(clients):
        c.wait_closed(10)
        echoed[f"u{10 + i}"] = [line.rsplit(":", 1)[1] for line in c.lines
                                if line.startswith(f":u{10 + i}!") and " PRIVMSG #crash :" in line]
    r = subprocess.run([CHAT, "log", "verify", "--data", data], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    dump = subprocess.run([CHAT, "log", "dump", "--data", data], capture_output=True, text=True,
                          timeout=30)
    assert dump.returncode == 0
    import json
    recs = [json.loads(line) for line in dump.stdout.splitlines()]
    for u, msgs in echoed.items():
        stored = [r["text"] for r in recs if r["sender"] == u and r["type"] == "message"]
        for m in msgs:
            assert stored.count(m) == 1, (u, m)
    # The restarted server carries on with the next id, once every process
    # of the killed one (the log's lock with them) is gone.
    from conftest import wait_for
    wait_for(lambda: subprocess.run(["pgrep", "-g", str(srv.pgid)],
                                    capture_output=True).returncode == 1,
             what="the killed server's processes to go")
    srv2, _ = chat(model, "--fsync", "always", data=data)
    c = login_pass(srv2.port, "u20", "pw-u20")
    c.send("JOIN #crash", "PRIVMSG #crash :after restart")
    c.expect(r" 366 ")
    c.send("PING x")
    c.expect(r"PONG")
    dump = subprocess.run([CHAT, "log", "dump", "--data", data], capture_output=True, text=True,
                          timeout=30)
    joined, last = (json.loads(line) for line in dump.stdout.splitlines()[-2:])
    assert (joined["type"], joined["sender"], joined["id"]) == ("join", "u20", len(recs) + 1)
    assert last["text"] == "after restart" and last["id"] == len(recs) + 2


def test_torn_tail_is_cut_and_reported(chat):
    srv, data = chat("epoll")
    c = login_pass(srv.port, "u30", "pw-u30")
    c.send("JOIN #t", *[f"PRIVMSG #t :n{k}" for k in range(5)], "PING x")
    c.expect(r"PONG")
    srv.close()
    seg = sorted((data / "log").glob("*.seg"))[-1]
    torn = b"YL\x01\x01\xff\x00\x00\x00garbage"   # a record head that claims 255 bytes
    with open(seg, "ab") as f:
        f.write(torn)
    srv2, _ = chat("epoll", data=data)
    from conftest import wait_for
    wait_for(lambda: f"cut {len(torn)} bytes of a torn or corrupt tail" in srv2.stderr(),
             what="the warning")
    c = login_pass(srv2.port, "u30", "pw-u30")
    c.send("JOIN #t", "PRIVMSG #t :next", "PING y")
    c.expect(r"PONG")
    r = subprocess.run([CHAT, "log", "dump", "--data", data], capture_output=True, text=True)
    ids = [json_id for json_id in (int(line.split('"id": ')[1].split(",")[0])
                                   for line in r.stdout.splitlines())]
    assert ids == list(range(1, 9))  # a join, five messages; a join, one message


# The processes (fork, its pair), one loop, coroutines and completions.
@pytest.mark.models(names=["fork", "fork-pair", "epoll", "coro", "uring"])
def test_yard_load_chat_counts_every_delivery(chat, model):
    """yard-load chat: 20 members, 400 messages at 400/s; every other member
    gets each one (19 x 400 deliveries), none lost."""
    srv, _ = chat(model)
    r = subprocess.run([BIN / "yard-load", "chat", "--target", f"127.0.0.1:{srv.port}",
                        "--connections", "20", "--rate", "400", "--duration", "1s", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    import json
    d = json.loads(r.stdout)
    assert d["mode"] == "chat" and d["messages_sent"] == 400
    assert d["deliveries"] == d["messages"] == 19 * 400 and d["errors"] == 0
    assert 0 < d["latency_us"]["p50"] < 1e6


def test_yard_load_chat_wrong_password_is_an_error(chat):
    srv, _ = chat("epoll")
    r = subprocess.run([BIN / "yard-load", "chat", "--target", f"127.0.0.1:{srv.port}",
                        "--connections", "2", "--rate", "10", "--duration", "1s",
                        "--password-prefix", "wrong-", "--timeout", "15s"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "refused the login" in r.stderr


def test_flood_control_paces_without_dropping(chat):
    """300 lines at once: 200 are served at once, the rest at 100 per second;
    none is dropped and the connection stays up."""
    import time
    srv, _ = chat("epoll")
    c = login_pass(srv.port, "u40", "pw-u40")
    t0 = time.monotonic()
    c.send(*[f"PING n{k}" for k in range(300)])
    got = c.collect(r"PONG yard :n(\d+)$", 300, timeout=20)
    took = time.monotonic() - t0
    assert [int(m.group(1)) for m in got] == list(range(300))
    assert took >= 0.8, took   # the last 100 waited for their tokens
    c.send("PING alive")
    c.expect(r"PONG yard :alive")


def test_pair_mode_is_a_process_pair(chat):
    """fork --pair: two processes per client, RECV and SEND, in the server's
    own process group; both go when the client does."""
    srv, _ = chat("fork-pair")
    from conftest import child_pids, wait_for

    def children():
        return child_pids(srv.proc.pid)

    c = login_pass(srv.port, "u41", "pw-u41")
    wait_for(lambda: len(children()) == 2, what="a RECV and a SEND process")
    assert os.getpgid(srv.proc.pid) == srv.proc.pid
    c.send("QUIT :bye")
    assert c.wait_closed()
    wait_for(lambda: len(children()) == 0, what="the pair gone with its client")


@pytest.mark.parametrize("flags,needle", [
    (["--model", "epoll", "--pair"], "--pair is papayaChat's process pair: it needs --model fork"),
])
def test_pair_usage_errors(accounts, flags, needle):
    r = subprocess.run([BIN / "yard-serve", "--app", "chat", "--data", accounts, *flags],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and needle in r.stderr
    r = subprocess.run([BIN / "yard-serve", "--app", "echo", "--model", "fork", "--pair"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "an app that relays news" in r.stderr


@pytest.mark.parametrize("name", ["bad_name", "a..b", "-a", "a.", "x" * 64, "sp ace"])
def test_server_name_must_be_a_host_name(accounts, name):
    """--server-name takes what IRC takes as a server's name: a host name."""
    r = subprocess.run([BIN / "yard-serve", "--app", "chat", "--model", "epoll", "--listen",
                        "127.0.0.1:0", "--data", accounts, "--server-name", name],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and f"--server-name {name}: not a server name" in r.stderr


def test_a_client_that_does_not_read_is_dropped(chat):
    """SendQ: a member that never reads is disconnected once --max-sendq
    bytes wait for it; the others carry on."""
    srv, _ = chat("epoll", "--max-sendq", "65536")
    lazy = socket.socket()
    lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    lazy.connect(("127.0.0.1", srv.port))
    lazy.sendall(b"PASS pw-u45\r\nNICK u45\r\nUSER u45 0 * :x\r\nJOIN #q\r\n")
    talkers = [login_pass(srv.port, f"u{i}", f"pw-u{i}") for i in range(20, 40)]
    for t in talkers:
        t.send("JOIN #q")
        t.expect(r" 366 ")
    from conftest import wait_for
    text = "y" * 400
    sent = 0
    while "send queue exceeded" not in srv.stderr() and sent < 40:
        for t in talkers:
            t.send(*[f"PRIVMSG #q :{text}"] * 100)
        sent += 1
        for t in talkers:   # keep the talkers' own sockets drained
            t.send("PING x")
            t.expect(r"PONG yard :x", timeout=30)
    wait_for(lambda: "send queue exceeded" in srv.stderr(), what="the SendQ disconnect")
    talkers[0].send("NAMES #q")
    names = talkers[0].expect(r" 353 \S+ = #q :(.*)$").group(1).split()
    assert "u45" not in names and "u20" in names
    lazy.close()


@pytest.mark.models(extra=["fork-pair"])
def test_a_thousand_paced_lines_all_reach_the_other_member(chat, model):
    """One member posts 1,000 lines two milliseconds apart; the other gets every one, in
    order. Under uring, a read of a connection's news watch that found the count already
    taken (EAGAIN) closed that connection a few hundred lines in (session 19): its member
    heard nothing more. No flood limit here, so the lines go at the pace they are sent."""
    srv, _ = chat(model, "--flood-rate", "0")
    a, b = login_pass(srv.port, "u0", "pw-u0"), login_pass(srv.port, "u1", "pw-u1")
    for c, nick in ((a, "u0"), (b, "u1")):
        c.send("JOIN #pace")
        c.expect(rf" 366 {nick} #pace ")
    for i in range(1000):
        a.send(f"PRIVMSG #pace :m{i}")
        time.sleep(0.002)
    got = b.collect(r"^:u0!u0@yard PRIVMSG #pace :m(\d+)$", 1000, timeout=60)
    assert [int(m.group(1)) for m in got] == list(range(1000))
    assert "news watch" not in srv.stderr()
    a.close()
    b.close()
