"""Bans in the chat service (issue 40), under every model. Channel bans: +b masks and the
account extban $a: keep their targets out (474) and silent (404), are listed with 367/368,
and are kept in DIR/bans across a restart. K-lines: `yard-chat kline` and an operator's
KLINE keep an account or a mask from registering (465), close the connections a new one
matches (no other account's), an expired one no longer applies, and they are kept in
DIR/klines across a restart; the tool's changes apply to a running server."""

import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_device, login_pass

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy", "dee")
chat = chat_fixture()


def join(c, nick, chan):
    c.send(f"JOIN {chan}")
    c.expect(rf" 366 {nick} {chan} ")


@pytest.mark.models()
def test_bans_keep_out_and_survive_a_restart(chat, model):
    srv, data = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    bo = login_pass(srv.port, "bo", "pw-bo")
    assert any("EXTBAN=$,a" in ln and "MAXLIST=beI:32" in ln for ln in ana.lines if " 005 " in ln)
    join(ana, "ana", "#b")
    join(bo, "bo", "#b")
    ana.send("MODE #b +bb $a:cy Bo!*@*")
    bo.expect(r"^:ana!ana@yard MODE #b \+bb \$a:cy Bo!\*@\*$")
    bo.send("PRIVMSG #b :can I?")
    bo.expect(r" 404 bo #b :Cannot send to channel \(\+b")
    cy = login_pass(srv.port, "cy", "pw-cy")
    cy.send("JOIN #b")
    cy.expect(r" 474 cy #b :Cannot join channel \(\+b\)$")
    for c in (ana, bo, cy):
        c.close()
    srv.close()
    srv2, _ = chat(model, data=data)
    # The channel is gone from memory; its bans are in DIR/bans.
    cy = login_pass(srv2.port, "cy", "pw-cy")
    cy.send("JOIN #b")
    cy.expect(r" 474 cy #b :Cannot join channel \(\+b\)$")
    ana = login_pass(srv2.port, "ana", "pw-ana")
    join(ana, "ana", "#b")                       # its operator: past the bans
    ana.send("MODE #b +b")
    ana.expect(r" 367 ana #b \$a:cy ana \d+$")
    ana.expect(r" 367 ana #b Bo!\*@\* ana \d+$")
    ana.expect(r" 368 ana #b :End of channel ban list$")
    ana.send("MODE #b -b $a:CY")
    ana.expect(r"^:ana!ana@yard MODE #b -b \$a:CY$")
    join(cy, "cy", "#b")
    for c in (ana, cy):
        c.close()


def kline(*args):
    return subprocess.run([CHAT, "kline", *map(str, args)], capture_output=True, text=True,
                          timeout=30)


def refused(port, name, why):
    c = Irc(port)
    c.send(f"PASS pw-{name}", f"NICK {name}", f"USER {name} 0 * :{name}")
    c.expect(rf"^:yard 465 {name} :You are banned from this server \(K-lined: {why}\)$")
    c.expect(rf"^ERROR :Closing Link: K-lined: {why}$")
    assert c.wait_closed()
    assert not any(" 001 " in ln for ln in c.lines)


@pytest.mark.models()
def test_klines_at_registration_and_across_a_restart(chat, model):
    srv, data = chat(model)
    r = subprocess.run([CHAT, "oper", "add", "root", "--data", data, "--cost", "4"],
                       input="pw-root\n", capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # The host's admin bans cy; an old ban of bo has expired (written as the file keeps it).
    assert kline("add", "cy", "--reason", "no cy", "--data", data).returncode == 0
    with open(data / "klines", "a") as f:
        f.write("$a:bo 1000 999 - :long ago\n")
    refused(srv.port, "cy", "no cy")
    laptop = login_device(srv.port, "bo", "laptop")   # the expired K-line: let in
    phone = login_device(srv.port, "bo", "phone")
    dee = login_pass(srv.port, "dee", "pw-dee")
    # An operator's KLINE closes every device of bo, not dee's connection.
    ana = login_pass(srv.port, "ana", "pw-ana")
    ana.send("KLINE bo :spam")
    ana.expect(r" 481 ana :Permission Denied- You're not an IRC operator$")
    ana.send("OPER root pw-root")
    ana.expect(r" 381 ana ")
    ana.send("KLINE BO :spam")
    ana.expect(r"^:yard NOTICE ana :Added a K-line for \$a:BO for good \(spam\); connections "
               r"closed: 2$")
    for c in (laptop, phone):
        c.expect(r"^:yard 465 bo :You are banned from this server \(K-lined: spam\)$")
        c.expect(r"^ERROR :Closing Link: K-lined: spam$")
        assert c.wait_closed()
    dee.send("PING :still")
    dee.expect(r"PONG \S+ :still$")
    refused(srv.port, "bo", "spam")
    for c in (ana, dee):
        c.close()
    srv.close()
    srv2, _ = chat(model, data=data)
    refused(srv2.port, "bo", "spam")
    refused(srv2.port, "cy", "no cy")
    out = kline("list", "--data", data).stdout.splitlines()
    assert out == ["$a:cy never - no cy", "$a:BO never ana spam"], out
    assert kline("del", "cy", "--data", data).returncode == 0
    r = kline("del", "cy", "--data", data)
    assert r.returncode == 1 and "no K-line for $a:cy" in r.stderr
    assert kline("add", "a b", "--data", data).returncode == 2
    login_pass(srv2.port, "cy", "pw-cy").close()


@pytest.mark.models()
def test_kline_by_the_admin_applies_while_the_server_runs(chat, model):
    """The server keeps the K-lines in shared memory and reloads them when DIR/klines.gen
    moves: `yard-chat kline add` and `del` made while it runs apply to the next
    registration, whichever process (fork, reactors --procs) takes it."""
    srv, data = chat(model)
    dee = login_pass(srv.port, "dee", "pw-dee")
    assert kline("add", "dee", "--reason", "by hand", "--data", data).returncode == 0
    for _ in range(3):
        refused(srv.port, "dee", "by hand")
    dee.send("PING :still")          # the tool's K-line closes nobody already connected
    dee.expect(r"PONG \S+ :still$")
    assert kline("del", "dee", "--data", data).returncode == 0
    for _ in range(3):
        login_pass(srv.port, "dee", "pw-dee").close()
    dee.close()
