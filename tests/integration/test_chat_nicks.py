"""Nicks apart from accounts (issue 40), under every model: SASL keeps the nick a client
registered with, and the other connections (in other processes, under fork) see it in
presence, messages (with account-tag), WHOIS (330 names the account) and NAMES; an
account's second device shares the nick; nobody takes an account's name or a nick in use;
the log records the account with the nick. STATUSMSG (@#chan) reaches a channel's
operators only; INFO answers 371/374."""

import base64
import json
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_pass, login_sasl

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo")
chat = chat_fixture()


def sasl_as(port, nick, account, caps="sasl"):
    """Registered as nick, logged in to account with SASL PLAIN; after 001."""
    c = Irc(port)
    c.send("CAP LS 302", f"NICK {nick}", f"USER u{nick} 0 * :Real {nick}", f"CAP REQ :{caps}",
           "AUTHENTICATE PLAIN")
    c.expect(r"^AUTHENTICATE \+")
    c.send("AUTHENTICATE " + base64.b64encode(f"\0{account}\0pw-{account}".encode()).decode())
    c.expect(r" 903 ")
    c.send("CAP END")
    c.expect(r" 001 ")
    return c


def join(c, nick, chan):
    c.send(f"JOIN {chan}")
    c.expect(rf" 366 {nick} {chan} ")


@pytest.mark.models(extra=["fork-pair"])
def test_sasl_keeps_the_nick_across_connections(chat, model):
    srv, data = chat(model, "--guests")
    an = sasl_as(srv.port, "an", "ana")
    assert any(" 900 an an!an@yard ana :You are now logged in as ana" in ln for ln in an.lines)
    assert any(" 001 an :Welcome to the yard chat, an" in ln for ln in an.lines)
    assert not [ln for ln in an.lines if " NICK " in ln]
    bo = login_sasl(srv.port, "bo", "pw-bo", caps="sasl account-tag extended-join")
    join(bo, "bo", "#n")
    join(an, "an", "#n")
    bo.expect(r"^@account=ana :an!an@yard JOIN #n ana :Real an$")
    an.send("PRIVMSG #n :hello as an")
    bo.expect(r"^@account=ana :an!an@yard PRIVMSG #n :hello as an$")
    bo.send("PRIVMSG an :hi an")
    an.expect(r"^:bo!bo@yard PRIVMSG an :hi an$")
    bo.send("WHOIS an")
    bo.expect(r" 311 bo an uan yard \* :Real an$")
    bo.expect(r" 330 bo an ana :is logged in as$")
    bo.send("NAMES #n")
    bo.expect(r" 353 bo = #n :an @bo$")
    an.send("QUIT :bye")                            # ana's only connection
    bo.expect(r"^@account=ana :an!an@yard QUIT :Quit: bye$")
    # Back as "an"; a second device of ana (PASS, nick ana) shares the nick.
    an = sasl_as(srv.port, "an", "ana")
    phone = login_pass(srv.port, "ana", "pw-ana")
    assert any(ln.endswith(":ana!ana@yard NICK :an") for ln in phone.lines), phone.lines
    assert any(" 001 an " in ln for ln in phone.lines), phone.lines
    # Nobody else takes the account's name or the nick.
    g = Irc(srv.port)
    g.send("NICK ana", "USER g 0 * :g")
    g.expect(r" 433 \* ana :Nickname is reserved for an account")
    g.send("NICK An")
    g.expect(r" 433 \* An :Nickname is already in use")
    g.send("NICK gus")
    g.expect(r" 001 gus ")
    # The log names the account, with the nick the message was sent under.
    dump = subprocess.run([CHAT, "log", "dump", "--data", str(data)], capture_output=True,
                          text=True, timeout=30)
    assert dump.returncode == 0, dump.stderr
    recs = [json.loads(ln) for ln in dump.stdout.splitlines()]
    said = [r for r in recs if r["type"] == "message" and r["text"] == "hello as an"]
    assert [r["sender"] for r in said] == ["ana/an"], said
    for c in (an, phone, bo, g):
        c.close()


@pytest.mark.models()
def test_statusmsg_reaches_operators_only(chat, model):
    srv, _ = chat(model, "--guests")
    ana = login_sasl(srv.port, "ana", "pw-ana")
    ana.expect(r" 005 ana .*STATUSMSG=@\+")
    join(ana, "ana", "#s")                          # its creator: an operator
    bo = login_sasl(srv.port, "bo", "pw-bo")
    join(bo, "bo", "#s")
    g = Irc(srv.port)
    g.send("NICK gus", "USER g 0 * :g")
    g.expect(r" 001 gus ")
    join(g, "gus", "#s")
    bo.send("PRIVMSG @#s :for the operators")
    ana.expect(r"^:bo!bo@yard PRIVMSG @#s :for the operators$")
    bo.send("PRIVMSG #s :for everyone")             # after it in the log: g has read past
    g.expect(r"^:bo!bo@yard PRIVMSG #s :for everyone$")
    ana.expect(r"^:bo!bo@yard PRIVMSG #s :for everyone$")
    assert not [ln for ln in g.lines if "for the operators" in ln]
    g.send("INFO")
    g.expect(r" 371 gus :Switchyard chat ")
    g.expect(r" 374 gus :End of /INFO list")
    for c in (ana, bo, g):
        c.close()
