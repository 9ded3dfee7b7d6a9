"""Presence in the chat service: the members of a channel hear who joins, parts and quits
(with the reason), under every model. An account with several connections is one member:
it joins with its first connection and leaves with its last. Presence goes through the log,
in the log's one order, so a later message is a marker: whatever presence came before it
has been relayed by the time it arrives."""

import json
import signal
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_device, login_pass
from conftest import wait_for

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy")
chat = chat_fixture()


def join(c, nick, chans):
    c.send(f"JOIN {chans}")
    c.expect(rf" 366 {nick} {chans.split(',')[-1]} ")


def marker(sender, nick, chan, reader, text):
    """sender says text in chan; reader's lines up to it are what came before it."""
    sender.send(f"PRIVMSG {chan} :{text}")
    reader.expect(rf"^:{nick}!{nick}@yard PRIVMSG {chan} :{text}$")
    return reader.lines[:reader.pos]


def presence_lines(lines, who):
    return [ln for ln in lines if ln.startswith(f":{who}!") and
            any(f" {cmd} " in ln or ln.endswith(f" {cmd}") for cmd in ("JOIN", "PART", "QUIT"))]


@pytest.mark.models(extra=["fork-pair"])
def test_members_hear_joins_parts_and_quits(chat, model):
    srv, _ = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    join(ana, "ana", "#p,#q")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(bo, "bo", "#p")
    ana.expect(r"^:bo!bo@yard JOIN #p$")
    ana.send("NAMES #p")
    m = ana.expect(r" 353 ana = #p :(.*)$")
    assert sorted(m.group(1).split()) == ["@ana", "bo"]   # ana made #p: its operator
    bo.send("PART #p :bye 👋 пока")
    bo.expect(r"^:bo!bo@yard PART #p :bye 👋 пока$")
    ana.expect(r"^:bo!bo@yard PART #p :bye 👋 пока$")
    # bo shares two channels with ana when it quits: ana is told once, with the reason.
    join(bo, "bo", "#p,#q")
    ana.expect(r"^:bo!bo@yard JOIN #p$")
    ana.expect(r"^:bo!bo@yard JOIN #q$")
    bo.send("QUIT :good night")
    assert bo.wait_closed()
    ana.expect(r"^:bo!bo@yard QUIT :Quit: good night$")
    # A client that just drops its connection is a quit too.
    cy = login_pass(srv.port, "cy", "pw-cy")
    join(cy, "cy", "#q")
    ana.expect(r"^:cy!cy@yard JOIN #q$")
    cy.close()
    ana.expect(r"^:cy!cy@yard QUIT :Connection closed$")
    # Everything ana heard of bo and cy, and of herself, up to a message of her own:
    # one line per event, none of her own presence relayed back.
    bo2 = login_pass(srv.port, "bo", "pw-bo")
    join(bo2, "bo", "#q")
    seen = marker(bo2, "bo", "#q", ana, "marker")
    assert presence_lines(seen, "bo") == [
        ":bo!bo@yard JOIN #p", ":bo!bo@yard PART #p :bye 👋 пока", ":bo!bo@yard JOIN #p",
        ":bo!bo@yard JOIN #q", ":bo!bo@yard QUIT :Quit: good night", ":bo!bo@yard JOIN #q"]
    assert presence_lines(seen, "cy") == [":cy!cy@yard JOIN #q",
                                          ":cy!cy@yard QUIT :Connection closed"]
    assert presence_lines(seen, "ana") == [":ana!ana@yard JOIN #p", ":ana!ana@yard JOIN #q"]
    for c in (ana, bo2):
        c.close()



@pytest.mark.models(names=["epoll", "thread"])
def test_an_account_is_one_member_however_many_connections(chat, model):
    srv, _ = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    cy = login_pass(srv.port, "cy", "pw-cy")
    join(ana, "ana", "#m,#n")
    join(cy, "cy", "#m")
    phone, desk = login_device(srv.port, "bo", "phone"), login_device(srv.port, "bo", "desk")
    join(phone, "bo", "#m")
    join(desk, "bo", "#m")  # bo is in #m already: nothing new for the others
    phone.send("PART #m :phone leaves")  # desk is still there: bo has not left
    phone.expect(r"^:bo!bo@yard PART #m :phone leaves$")
    seen = marker(cy, "cy", "#m", ana, "one")
    assert presence_lines(seen, "bo") == [":bo!bo@yard JOIN #m"]
    desk.send("PART #m :desk leaves")  # the last of bo's connections in #m
    ana.expect(r"^:bo!bo@yard PART #m :desk leaves$")
    # phone in #m, desk in #n; the phone drops: bo is still online, so ana hears a part of
    # #m, not a quit; then the desk quits: a quit, heard through #n.
    join(phone, "bo", "#m")
    join(desk, "bo", "#n")
    phone.close()
    ana.expect(r"^:bo!bo@yard PART #m :Connection closed$")
    desk.send("QUIT :done")
    ana.expect(r"^:bo!bo@yard QUIT :Quit: done$")
    seen = marker(cy, "cy", "#m", ana, "two")
    assert presence_lines(seen, "bo") == [
        ":bo!bo@yard JOIN #m", ":bo!bo@yard PART #m :desk leaves", ":bo!bo@yard JOIN #m",
        ":bo!bo@yard JOIN #n", ":bo!bo@yard PART #m :Connection closed",
        ":bo!bo@yard QUIT :Quit: done"]
    for c in (ana, cy):
        c.close()


def dump(data):
    r = subprocess.run([CHAT, "log", "dump", "--data", str(data)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [json.loads(ln) for ln in r.stdout.splitlines()]


def test_presence_is_in_the_log_but_not_in_replays_and_a_stop_is_no_quit(chat):
    srv, data = chat("epoll")
    ana = login_pass(srv.port, "ana", "pw-ana")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(ana, "ana", "#r")
    # A presence record is appended behind the reply (yard_chatlog_defer): bo joins once
    # ana's is in the log, or bo, already a member when it is told, hears ana join too.
    wait_for(lambda: [r["type"] for r in dump(data)] == ["join"], what="ana's JOIN in the log")
    join(bo, "bo", "#r")
    ana.expect(r"^:bo!bo@yard JOIN #r$")
    bo.send("PART #r")
    ana.expect(r"^:bo!bo@yard PART #r$")
    ana.send("PRIVMSG #r :while bo was away", "PING logged")  # PONG: after the append
    ana.expect(r" PONG yard :logged$")
    join(bo, "bo", "#r")  # the replay of what bo missed: the message only
    bo.expect(r"^:ana!ana@yard PRIVMSG #r :while bo was away$")
    ana.expect(r"^:bo!bo@yard JOIN #r$")
    seen = marker(ana, "ana", "#r", bo, "after")
    assert [ln for ln in seen if ln.startswith(":ana!")] == [
        ":ana!ana@yard PRIVMSG #r :while bo was away", ":ana!ana@yard PRIVMSG #r :after"]
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=10) == 0
    recs = [(r["type"], r["sender"], r["target"], r["text"]) for r in dump(data)]
    # (a join's text is USER's realname, for extended-join)
    assert recs == [("join", "ana", "#r", "ana"), ("join", "bo", "#r", "bo"),
                    ("part", "bo", "#r", ""), ("message", "ana", "#r", "while bo was away"),
                    ("join", "bo", "#r", "bo"), ("message", "ana", "#r", "after")]
    for c in (ana, bo):
        c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_a_stop_says_error_to_every_client(chat, model):
    """SIGTERM: every client, logged in or not, gets ERROR :Server shutting down, then
    the end of the connection; the server exits 0."""
    srv, _ = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    join(ana, "ana", "#s")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(bo, "bo", "#s")
    ana.expect(r"^:bo!bo@yard JOIN #s$")
    stranger = Irc(srv.port)  # connected, not logged in
    stranger.send("NICK someone")
    stranger.send("PING registered?")  # answered before login: the server has read NICK
    stranger.expect(r" PONG yard :registered\?$")
    srv.proc.send_signal(signal.SIGTERM)
    for c in (ana, bo, stranger):
        c.expect(r"^ERROR :Server shutting down$")
        assert c.wait_closed()
    assert srv.proc.wait(timeout=10) == 0
    assert not any(" QUIT " in ln for ln in ana.lines + bo.lines)
