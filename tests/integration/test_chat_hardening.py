"""The chat service against abuse: login limits (a flood of bad logins from
one address, guessing at one account, timing that would tell which accounts
exist), channel slots that are given back, one line that cannot forge a
sender or carry terminal controls, target lists that cannot multiply a
message; and what real clients showed (topics relayed and kept, an account
listed once, every device catching up)."""

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from chatlib import CHAT, Irc, add_account, add_accounts, chat_starter, login_pass
from conftest import child_pids, wait_for

pytestmark = pytest.mark.usefixtures("yard_chat_built")


@pytest.fixture(scope="module")
def accounts(tmp_path_factory):
    """Cheap accounts u0..u19 (cost 4), and two at the tool's default cost
    12: alice and victim (the timing and the limits are about real costs)."""
    d = tmp_path_factory.mktemp("accounts")
    add_accounts(d, (f"u{i}" for i in range(20)))
    add_account(d, "alice", "pw-alice", cost=12)
    add_account(d, "victim", "pw-victim", cost=12)
    return d


@pytest.fixture
def chat(start_server, accounts, tmp_path):
    return chat_starter(start_server, accounts, tmp_path)


class OpenAttempts:
    """The connections of login attempts under way in several threads; cut() ends them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._conns = set()

    def add(self, c):
        with self._lock:
            self._conns.add(c)

    def discard(self, c):
        with self._lock:
            self._conns.discard(c)

    def cut(self):
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.sock.shutdown(socket.SHUT_RDWR)


def pass_attempt(port, name, password, source=None, timeout=20.0, conns=None):
    """One PASS login on a fresh connection: (verdict, seconds, last line),
    verdict one of 'ok', 'incorrect', 'refused' (an ERROR without 464).
    conns: an OpenAttempts the connection is in while the attempt lasts."""
    t0 = time.monotonic()
    c = Irc(port, source=source, timeout=timeout)
    if conns is not None:
        conns.add(c)
    try:
        c.send(f"PASS {password}", f"NICK {name}", f"USER {name} 0 * :x")
        m = c.expect(r"( 001 | 464 |^ERROR )", timeout=timeout)
        took = time.monotonic() - t0
        line = c.lines[c.pos - 1]
        if m.group(1) == " 001 ":
            return "ok", took, line
        if m.group(1) == " 464 ":
            return "incorrect", took, line
        return "refused", took, line
    finally:
        if conns is not None:
            conns.discard(c)
        c.close()


# ---- abuse hole 1: bad logins from one address -------------------------------

@pytest.mark.timing
@pytest.mark.models(names=["epoll", "thread", "fork", "coro", "uring"])
def test_a_login_flood_from_one_address_does_not_delay_another(chat, model):
    """100 connections from 127.0.0.1 hammer wrong passwords; a real user on
    127.0.0.2 logs in meanwhile in under 2 s (before: 16.6 s). The flood gets
    no more checks than its address's bucket holds."""
    srv, _ = chat(model)
    stop = threading.Event()
    verdicts = []
    lock = threading.Lock()
    open_attempts = OpenAttempts()   # cut when the test has its answer

    def attacker(k):
        name = "victim" if k % 2 else f"nobody{k}"
        deadline = time.monotonic() + 8
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                v, _, _ = pass_attempt(srv.port, name, f"guess{k}", source="127.0.0.1",
                                       timeout=15, conns=open_attempts)
            except (OSError, AssertionError):
                v = "dropped"   # refused at connect (too many unregistered), or cut at the end
            with lock:
                verdicts.append(v)
            stop.wait(0.2)

    threads = [threading.Thread(target=attacker, args=(k,)) for k in range(100)]
    t_attack = time.monotonic()
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(verdicts) >= 20 or time.monotonic() - t_attack > 1.5,
                 what="the flood to be under way")
        verdict, took, line = pass_attempt(srv.port, "alice", "pw-alice", source="127.0.0.2")
        assert verdict == "ok", line
        assert took < 2.0, f"the real login took {took:.2f} s during the flood"
    finally:
        stop.set()
        open_attempts.cut()   # a failed login's answer may be seconds away
        for t in threads:
            t.join(30)
    elapsed = time.monotonic() - t_attack
    checked = verdicts.count("incorrect")
    # 30 failures at once, then 30 per 10 minutes (the default).
    assert checked <= 30 + elapsed * 30 / 600 + 1, (checked, elapsed)
    assert verdicts.count("refused") > 0
    assert "ok" not in verdicts
    # The server still serves.
    c = login_pass(srv.port, "u1", "pw-u1", source="127.0.0.3")
    c.send("PING alive")
    c.expect("PONG yard :alive")


def test_guessing_one_account_follows_the_back_off(chat):
    """1,000 guesses at one account from 50 addresses: no more are checked
    than the account's bucket allows (10 at once, then 10 per 10 minutes);
    the rest are told at once when to try again. The owner, from an address
    it logged in from before, still gets in; a new address waits. (The 10
    checks at cost 12 may take longer than the 10 s registration timeout on
    a loaded machine: the timeout is not what this test is about.)"""
    srv, _ = chat("epoll", "--registration-timeout-ms", "120000")
    ok, _, line = pass_attempt(srv.port, "victim", "pw-victim", source="127.0.0.2")
    assert ok == "ok", line
    counts = {"ok": 0, "incorrect": 0, "refused": 0}
    waits = []
    lock = threading.Lock()
    t0 = time.monotonic()

    def guess(i):
        v, _, line = pass_attempt(srv.port, "victim", f"guess{i}",
                                  source=f"127.0.1.{10 + i % 50}")
        with lock:
            counts[v] += 1
            if v == "refused":
                waits.append(line)

    with ThreadPoolExecutor(40) as ex:
        list(ex.map(guess, range(1000)))
    elapsed = time.monotonic() - t0
    assert counts["ok"] == 0
    assert counts["incorrect"] + counts["refused"] == 1000
    assert counts["incorrect"] <= 10 + elapsed * 10 / 600 + 1, (counts, elapsed)
    assert counts["incorrect"] >= 10
    # Refused at once, saying when a guess is due again (one per minute).
    assert all("too many failed logins for victim; try again in" in w for w in waits), waits[:3]
    secs = [int(w.rsplit("try again in ", 1)[1].split()[0]) for w in waits]
    assert 1 <= max(secs) <= 60
    # The owner, from home, gets in; a stranger's address is held back.
    assert pass_attempt(srv.port, "victim", "pw-victim", source="127.0.0.2")[0] == "ok"
    v, _, line = pass_attempt(srv.port, "victim", "pw-victim", source="127.0.0.99")
    assert v == "ok", line   # the owner's login just forgave the failures


def test_the_bound_on_checks_in_flight_answers_at_once(chat, accounts, tmp_path):
    """With one check allowed in flight, a second login from elsewhere is told
    at once that the server is busy, while the first is still being checked."""
    data = tmp_path / "slow"
    shutil.copytree(accounts, data)
    add_account(data, "slow", "pw-slow", cost=15)   # a check takes a few seconds
    srv, _ = chat("epoll", "--login-max-pending", "1", data=data)
    a = Irc(srv.port, source="127.0.0.2")
    a.send("PASS pw-slow", "NICK slow", "USER slow 0 * :x")
    # a's lines were queued on its socket before b connected; the single
    # loop has read them by the time it answers b's CAP and AUTHENTICATE.
    b = Irc(srv.port, source="127.0.0.3")
    b.send("CAP LS 302", "NICK u1", "USER u1 0 * :x", "CAP REQ :sasl", "AUTHENTICATE PLAIN")
    b.expect(r"^AUTHENTICATE \+")
    b.send("AUTHENTICATE " + base64.b64encode(b"\0u1\0pw-u1").decode())
    b.expect(r" 904 .*the server is busy checking other logins")
    assert not any(" 001 " in line for line in a.lines), "a's check had already finished"
    a.expect(r" 001 slow ", timeout=60)
    # Afterwards b gets in on the same connection.
    b.send("AUTHENTICATE PLAIN")
    b.expect(r"^AUTHENTICATE \+")
    b.send("AUTHENTICATE " + base64.b64encode(b"\0u1\0pw-u1").decode())
    b.expect(r" 903 ")


def test_connections_that_have_not_logged_in_are_capped_per_address(chat):
    srv, _ = chat("epoll", "--max-unregistered-per-addr", "5")
    idle = [Irc(srv.port, source="127.0.0.1") for _ in range(5)]
    for c in idle:
        c.send("CAP LS 302")
        c.expect(r"CAP \* LS ")
    extra = Irc(srv.port, source="127.0.0.1")
    extra.expect(r"^ERROR :Closing Link: too many connections from 127.0.0.1 have not logged "
                 r"in \(at most 5\)")
    assert extra.wait_closed()
    # Another address is not affected; a login frees a place.
    login_pass(srv.port, "u2", "pw-u2", source="127.0.0.2")
    idle[0].send("PASS pw-u3", "NICK u3", "USER u3 0 * :x", "CAP END")
    idle[0].expect(r" 001 u3 ")
    login_pass(srv.port, "u4", "pw-u4", source="127.0.0.1")


# ---- abuse hole 5: timing tells which accounts exist -------------------------

@pytest.mark.timing
def test_unknown_and_existing_accounts_fail_in_the_same_time(chat):
    """Failure times for an existing account (bcrypt cost 12) and an unknown
    one differ by less than 20 ms (before: ~134 ms, no overlap). Compared
    pair by pair (each known attempt with the unknown one right after it),
    so that a busy machine slowing both down does not count as a difference.
    The failure's delay is turned off: its second per attempt is the same
    for both and only made the test 16 s longer."""
    srv, _ = chat("epoll", "--login-fail-delay-ms", "0")
    known, unknown = [], []
    for i in range(8):   # interleaved, each on a fresh connection and address (at most
        # 10 failures an account before its bucket refuses)
        for name, out in (("victim", known), ("nosuchuser", unknown)):
            v, took, line = pass_attempt(srv.port, name, "wrong",
                                         source=f"127.0.2.{len(known) + len(unknown) + 1}")
            assert v == "incorrect", line
            out.append(took)
    diff = abs(statistics.median(k - u for k, u in zip(known, unknown)))
    assert diff < 0.020, (known, unknown)


# ---- abuse hole 2: the channel table ------------------------------------------

def test_empty_channels_are_freed_and_an_account_has_a_channel_limit(chat):
    srv, _ = chat("epoll", "--max-channels", "8", "--max-channels-per-account", "5")
    a = login_pass(srv.port, "u1", "pw-u1")
    a.expect(r" 005 u1 .*CHANLIMIT=#&:5 ")
    a.send(*[f"JOIN #a{k}" for k in range(6)])
    for k in range(5):
        a.expect(rf"JOIN #a{k}$")
    a.expect(r" 405 u1 #a5 :You have joined too many channels \(CHANLIMIT 5\)")
    # Another connection of the same account counts towards the same limit.
    a2 = login_pass(srv.port, "u1", "pw-u1")
    a2.send("JOIN #a0", "JOIN #other")
    a2.expect(r"JOIN #a0$")
    a2.expect(r" 405 u1 #other ")
    a2.close()
    a.send("JOIN 0")
    for k in range(5):
        a.expect(rf"PART #a{k} ")
    # The slots came back: others fill the table to its size, and no further.
    b = login_pass(srv.port, "u2", "pw-u2")
    c = login_pass(srv.port, "u3", "pw-u3")
    b.send(*[f"JOIN #b{k}" for k in range(5)])
    for k in range(5):
        b.expect(rf"JOIN #b{k}$")
    c.send(*[f"JOIN #c{k}" for k in range(4)])
    for k in range(3):
        c.expect(rf"JOIN #c{k}$")
    c.expect(r" 405 u3 #c3 :The server holds no more channels")


# ---- abuse hole 3: CR inside a line, control characters ------------------------

def test_a_bare_cr_cannot_forge_a_sender(chat):
    srv, _ = chat("epoll")
    a = login_pass(srv.port, "u1", "pw-u1")
    b = login_pass(srv.port, "u2", "pw-u2")
    for c in (a, b):
        c.send("JOIN #x")
        c.expect(r" 366 ")
    a.sock.sendall(b"PRIVMSG #x :hi\r:u2!u2@yard PRIVMSG #x :FAKE\r\nPRIVMSG #x :end\r\n")
    b.expect(r"^:u1!u1@yard PRIVMSG #x :end$")
    # Every CR b received ends a line; the would-be line is u1's own message.
    assert b.raw.count(b"\r") == b.raw.count(b"\r\n")
    assert ":u1!u1@yard PRIVMSG #x :hi" in b.lines
    assert ":u1!u1@yard PRIVMSG #x :FAKE" in b.lines
    assert not any(line.startswith(":u2!") and " PRIVMSG " in line for line in b.lines)


def test_control_characters_are_removed(chat):
    srv, data = chat("epoll")
    a = login_pass(srv.port, "u1", "pw-u1")
    b = login_pass(srv.port, "u2", "pw-u2")
    for c in (a, b):
        c.send("JOIN #x")
        c.expect(r" 366 ")
    a.sock.sendall(b"PRIVMSG #x :\x1b[2J\x1b]0;owned\x07red\x1b[0m\ttab \x02bold\x02 "
                   b"\xc2\x9b31m \x7f\x01ACTION waves\x01\r\n"
                   b"TOPIC #x :\x1b]8;;http://evil\x07link\r\n")
    got = b.expect(r"^:u1!u1@yard PRIVMSG #x :(.*)$").group(1)
    assert got == "[2J]0;ownedred[0m tab \x02bold\x02 31m \x01ACTION waves\x01"
    topic = b.expect(r"^:u1!u1@yard TOPIC #x :(.*)$").group(1)
    assert topic == "]8;;http://evillink"
    for raw_byte in (b"\x1b", b"\x07", b"\x7f", b"\xc2\x9b"):
        assert raw_byte not in b.raw
    # Nor do they reach the log.
    b.send("PING x")
    b.expect("PONG")
    dump = subprocess.run([CHAT, "log", "dump", "--data", data], capture_output=True, text=True,
                          timeout=30)
    texts = [json.loads(line)["text"] for line in dump.stdout.splitlines()]
    assert got in texts and not any("\x1b" in t for t in texts)


# ---- abuse hole 4: lists of targets --------------------------------------------

def test_a_target_list_cannot_multiply_a_message(chat):
    srv, data = chat("epoll")
    a = login_pass(srv.port, "u1", "pw-u1")
    a.expect(r" 005 u1 .*TARGMAX=PRIVMSG:4,NOTICE:4")
    b = login_pass(srv.port, "u2", "pw-u2")
    for c in (a, b):
        c.send("JOIN #x", "JOIN #y")
        c.expect(r"JOIN #y")
        c.expect(r" 366 u\d #y ")
    a.send("PRIVMSG " + ",".join(["#x", "#X"] * 80) + " :once")
    a.send("PRIVMSG #x,#y,u2,#nope,#z :five")
    a.expect(r" 407 u1 \S+ :Too many targets: at most 4 \(TARGMAX\); 1 not sent to")
    a.expect(r" 403 u1 #nope ")
    # Relayed in the log's order: once the next message is there, so is all
    # that came before it.
    a.send("PRIVMSG #x :barrier")
    b.expect(r"PRIVMSG #x :barrier$")
    assert sum(line.endswith("PRIVMSG #x :once") for line in b.lines) == 1
    assert sum(line.endswith(":five") for line in b.lines) == 3   # #x, #y and u2
    dump = subprocess.run([CHAT, "log", "dump", "--data", data], capture_output=True, text=True,
                          timeout=30)
    texts = [json.loads(line)["text"] for line in dump.stdout.splitlines()]
    assert texts.count("once") == 1 and texts.count("five") == 3


def test_flood_control_charges_every_delivered_target(chat):
    """60 lines to 4 channels each are 240 deliveries: 200 at once, the other
    40 at 100 per second (before: 60 tokens, no pause at all)."""
    srv, _ = chat("epoll")
    a = login_pass(srv.port, "u1", "pw-u1")
    a.send("JOIN #p1,#p2,#p3,#p4")
    a.expect(r" 366 u1 #p4 ")
    t0 = time.monotonic()
    a.send(*[f"PRIVMSG #p1,#p2,#p3,#p4 :n{k}" for k in range(60)], "PING done")
    a.expect(r"PONG yard :done", timeout=20)
    took = time.monotonic() - t0
    assert took >= 0.3, took


def test_flood_rate_and_burst_are_flags(chat):
    """--flood-rate 20 --flood-burst 5: 45 lines take 2 s (5 at once, 40 at 20/s); with
    --flood-rate 0 a client is never held back: 2000 lines are answered well inside the
    20 s that the default 100/s would take."""
    srv, _ = chat("epoll", "--flood-rate", "20", "--flood-burst", "5")
    a = login_pass(srv.port, "u1", "pw-u1")
    t0 = time.monotonic()
    a.send(*[f"PING n{k}" for k in range(44)], "PING done")
    a.expect(r"PONG yard :done", timeout=20)
    assert time.monotonic() - t0 >= 1.8
    a.close()
    srv.close()
    srv, _ = chat("epoll", "--flood-rate", "0")
    b = login_pass(srv.port, "u2", "pw-u2")
    t0 = time.monotonic()
    b.send(*[f"PING n{k}" for k in range(1999)], "PING done")
    b.expect(r"PONG yard :done", timeout=15)
    assert len([ln for ln in b.lines if " PONG " in ln]) == 2000
    b.close()


# ---- what real clients showed --------------------------------------------------

@pytest.mark.models(extra=["fork-pair"])
def test_topic_changes_reach_every_member_and_survive_a_restart(chat, model):
    srv, data = chat(model)
    a = login_pass(srv.port, "u1", "pw-u1")
    b = login_pass(srv.port, "u2", "pw-u2")
    for c in (a, b):
        c.send("JOIN #t")
        c.expect(r" 366 ")
    a.send("TOPIC #t :plans for ünïcödé ✓")
    for c in (a, b):
        c.expect(r"^:u1!u1@yard TOPIC #t :plans for ünïcödé ✓$")
    # Everyone leaves: the channel's slot goes, its topic stays.
    a.send("PART #t")
    b.send("PART #t")
    a.expect(r"PART #t")
    b.expect(r"PART #t")
    c = login_pass(srv.port, "u3", "pw-u3")
    c.send("JOIN #t")
    c.expect(r" 332 u3 #t :plans for ünïcödé ✓$")
    c.expect(r" 333 u3 #t u1!u1@yard \d+$")
    # A kill -9 and a restart keep it too.
    os.killpg(srv.pgid, signal.SIGKILL)
    srv.proc.wait(10)
    # Every process of the group gone (the log's lock with them).
    wait_for(lambda: subprocess.run(["pgrep", "-g", str(srv.pgid)],
                                    capture_output=True).returncode == 1,
             what="the killed server's processes to go")
    srv2, _ = chat(model, data=data)
    d = login_pass(srv2.port, "u4", "pw-u4")
    d.send("JOIN #T")
    d.expect(r" 332 u4 #T :plans for ünïcödé ✓$")   # found by its casefolded name
    d.send("TOPIC #t :")   # +t, and u4 is no operator of it
    d.expect(r" 482 u4 #T :You're not channel operator \(\+t\)")
    e = login_pass(srv2.port, "u1", "pw-u1")   # its creator is, after the restart too
    e.send("JOIN #t", "TOPIC #t :", "TOPIC #t")
    e.expect(r" 331 u1 #T :No topic is set")


@pytest.mark.models(extra=["fork-pair"])
def test_every_device_of_an_account_catches_up_once(chat, model):
    """The phone stays in the channel; the laptop leaves, 20 messages pass,
    and it comes back: it gets exactly those 20, once (before: nothing, as
    the phone had moved the account's one read position)."""
    srv, _ = chat(model)
    phone = Irc(srv.port)
    phone.send("CAP LS 302", "NICK u5", "USER u5 0 * :x", "CAP REQ :sasl", "AUTHENTICATE PLAIN")
    phone.expect(r"^AUTHENTICATE \+")
    phone.send("AUTHENTICATE " + base64.b64encode(b"\0u5@phone\0pw-u5").decode(), "CAP END")
    phone.expect(r" 001 u5 ")
    phone.send("JOIN #dev")
    phone.expect(r" 366 ")

    def laptop():
        c = Irc(srv.port)
        c.send("PASS pw-u5", "NICK u5", "USER laptop 0 * :x", "JOIN #dev", "PING joined")
        c.expect(r" 366 ")
        c.expect("PONG yard :joined")
        return c

    lap = laptop()
    lap.send("QUIT :off")
    assert lap.wait_closed()
    talker = login_pass(srv.port, "u6", "pw-u6")
    talker.send("JOIN #dev", *[f"PRIVMSG #dev :m{k}" for k in range(20)])
    phone.collect(r"PRIVMSG #dev :m\d+$", 20)
    lap = laptop()
    lap.send("PING replayed")
    lap.expect("PONG yard :replayed")
    assert [line.rsplit(":", 1)[1] for line in lap.lines if " PRIVMSG #dev :" in line] == \
        [f"m{k}" for k in range(20)]
    lap.send("QUIT")
    assert lap.wait_closed()
    # Exactly once: back again, nothing is replayed; nor to the phone.
    lap = laptop()
    lap.send("PING again")
    lap.expect("PONG yard :again")
    assert not any(" PRIVMSG #dev :" in line for line in lap.lines)
    phone.send("PART #dev", "JOIN #dev", "PING p")
    phone.expect("PONG yard :p")
    assert sum(" PRIVMSG #dev :" in line for line in phone.lines) == 20


# ---- abuse round 2 (issue 44): connections that come and go -----------------

def _server_tasks(srv, model):
    """What a connection costs the server while it lasts: its processes under fork, its
    threads under thread."""
    if model == "fork":
        return len(child_pids(srv.proc.pid))
    return len(os.listdir(f"/proc/{srv.proc.pid}/task"))


@pytest.mark.models(names=["fork", "thread"])
def test_connections_that_close_at_once_leave_nothing_behind(chat, model):
    """5,000 connections that connect, send a bad line and close piled up 4,758 processes
    under fork (issue 44): each waited out --registration-timeout-ms after its peer had gone,
    spinning on poll. Now a connection ends with its peer's close; with the timeout a minute
    away, every one of a burst is gone within seconds, and a login goes through at once."""
    srv, _ = chat(model, "--registration-timeout-ms", "60000")
    # The first connection starts the process's news waker (a thread that stays: every
    # connection watches the bus from its open, for news or for being shed); a login
    # and a close first, so that the count is of connections only.
    before = _server_tasks(srv, model)
    login_pass(srv.port, "u2", "pw-u2").close()
    base = before if model == "fork" else before + 1     # (a process of its own under fork)
    wait_for(lambda: _server_tasks(srv, model) <= base, timeout=10,
             what="the first login's process or thread to end")
    for _ in range(300):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"\x01bad\r\n")
        s.close()
    wait_for(lambda: _server_tasks(srv, model) <= base, timeout=10,
             what=f"the burst's {'processes' if model == 'fork' else 'threads'} to end")
    login_pass(srv.port, "u1", "pw-u1").close()


def _answered(s: socket.socket) -> bool:
    """Has the server written to (or closed) this connection yet?"""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) is not None
    except BlockingIOError:
        return False
    except OSError:
        return True


ACCEPTED = re.compile(r"127\.0\.0\.1:(\d+): connection accepted")


@pytest.mark.models(names=["fork", "thread"])
def test_a_live_connection_is_not_queued_behind_hung_up_ones(chat, model):
    """Under a burst of connections that send a line and close, a login waited behind the
    whole accept queue, one fork (or thread) each: over a second for 5,000 (issue 44). Now
    the accept loop hands over a connection whose peer is still there before those whose
    peer has hung up, and those after. 400 connections that sent a line and half-closed
    queue up while the server is stopped, then one that stays: in the order the server
    hands them over (its debug line for each), the live one comes before the hung-up ones
    it was not accepted with (before: last), and every hung-up one is still answered. The
    order of the answers themselves is the scheduler's, not the loop's."""
    srv, _ = chat(model, "--log-level", "debug")
    hung = []
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(400):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(b"\x01bad\r\n")
            s.shutdown(socket.SHUT_WR)
            hung.append(s)
        live = Irc(srv.port)
        live.send("PING live")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    try:
        live.expect(r"PONG .*live", timeout=30)
        wait_for(lambda: all(_answered(s) for s in hung), timeout=60,
                 what="every hung-up connection to be answered")
        wait_for(lambda: len(ACCEPTED.findall(srv.stderr())) == 401, timeout=10,
                 what="a debug line for each of the 401 connections handed over")
        order = [int(p) for p in ACCEPTED.findall(srv.stderr())]
        # Accepted 64 at a time, 4 hung-up ones handed over a turn: the live one, the
        # 401st in the kernel's queue, is handed over with the seventh batch.
        assert order.index(live.sock.getsockname()[1]) < 7 * 4 + 1, order[:40]
    finally:
        live.sock.close()
        for s in hung:
            s.close()


# timing: the connection must end within 1.5 s (not at the 10 s registration timeout), and
# strace, which counts the polls, took over 60 s to detach from a fork server's processes
# when the suite's other tests loaded the machine (fresh clone, session 18).
@pytest.mark.timing
@pytest.mark.models(names=["fork", "thread"])
def test_a_connection_whose_peer_closed_ends_without_spinning(chat, model, tmp_path):
    """A client that sends a bad line and half-closes before logging in: the server answers
    and ends the connection at once. Before, the blocking models kept it for
    --registration-timeout-ms, waiting for that timer in a poll on the socket with no
    events asked, which reports the hang-up whatever is asked: thousands of polls a second.
    Counted with strace over a second and a half."""
    strace = shutil.which("strace")
    assert strace, "strace is missing (make test installs it)"
    srv, _ = chat(model)
    out = tmp_path / "polls"
    tracer = subprocess.Popen([strace, "-f", "-c", "-e", "trace=poll", "-o", str(out), "-p",
                               str(srv.proc.pid)], stderr=subprocess.PIPE, text=True)
    try:
        # strace says it attached (to each thread) on stderr before it traces.
        wait_for(lambda: "attached" in tracer.stderr.readline(), timeout=10,
                 what="strace to attach")
        c = Irc(srv.port)
        c.sock.sendall(b"\x01bad\r\n")
        c.sock.shutdown(socket.SHUT_WR)
        c.expect(r" 421 ")
        closed = c.wait_closed(timeout=1.5)
    finally:
        # The server is stopped first: strace then ends when the last process it follows
        # has, and writes its count. Asked to detach instead (SIGINT), it sometimes took
        # over 60 s to let go of a fork server's processes, even with the machine to
        # itself (the timing phase of fresh-clone runs in sessions 18 and 19).
        srv.stop()
        try:
            tracer.wait(60)
        except subprocess.TimeoutExpired:
            tracer.kill()
            tracer.wait(10)
            raise AssertionError("strace did not end within 60 s of the server's exit")
    rows = [ln.split() for ln in out.read_text().splitlines()]
    polls = next((int(r[3]) for r in rows if r and r[-1] == "poll"), 0)
    assert closed, "the server kept the connection after its peer closed"
    assert polls < 200, f"{polls} polls for one connection"
