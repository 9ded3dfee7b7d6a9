"""Channel operators and modes in the chat service (issue 18): the account that creates a
channel is its operator; +o +v +t +n +i +k +l +m with their numerics; KICK and INVITE;
PREFIX, CHANMODES and MODES in 005; multi-prefix. Changes go through the log to every
member (the setter too) and are kept in DIR/channels across restarts, under every model."""

import json
import subprocess

import pytest

from chatlib import CHAT, accounts_fixture, chat_fixture, login_pass, login_sasl

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy", "dee")
chat = chat_fixture()


def join(c, nick, chan, key=None):
    c.send(f"JOIN {chan}" + (f" {key}" if key else ""))
    c.expect(rf" 366 {nick} {chan} ")


def names(c, nick, chan):
    c.send(f"NAMES {chan}")
    return sorted(c.expect(rf" 353 {nick} = {chan} :(.*)$").group(1).split())


def mode_of(c, nick, chan):
    c.send(f"MODE {chan}")
    return c.expect(rf" 324 {nick} {chan} (.*)$").group(1)


@pytest.mark.models(extra=["fork-pair"])
def test_operators_modes_kick_and_invite(chat, model):
    srv, _ = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    for line in ("PREFIX=(ov)@+", "CHANMODES=beI,k,l,MRimnst", "MODES=4", "KICK:4"):
        assert any(line in ln for ln in ana.lines if " 005 " in ln), line
    join(ana, "ana", "#m")
    assert names(ana, "ana", "#m") == ["@ana"]          # the creator is its operator
    assert mode_of(ana, "ana", "#m") == "+nt"
    ana.expect(r" 329 ana #m \d+$")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(bo, "bo", "#m")
    assert names(bo, "bo", "#m") == ["@ana", "bo"]
    # Not an operator: no changes, no topic under +t, no KICK.
    bo.send("MODE #m -t", "TOPIC #m :mine", "KICK #m ana")
    for _ in range(3):
        bo.expect(r" 482 bo #m :You're not channel operator")
    # +o goes to bo: everyone hears it, the setter too; then bo may change the topic.
    ana.send("MODE #m +o bo")
    ana.expect(r"^:ana!ana@yard MODE #m \+o bo$")
    bo.expect(r"^:ana!ana@yard MODE #m \+o bo$")
    assert names(ana, "ana", "#m") == ["@ana", "@bo"]
    bo.send("TOPIC #m :ours ☕")
    ana.expect(r"^:bo!bo@yard TOPIC #m :ours ☕$")
    # Unknown flags, a missing parameter, a bad limit and a nick nobody has (cy is
    # not connected yet: 401; connected but not in #m it is 441, below).
    ana.send("MODE #m +xl", "MODE #m +l many", "MODE #m +o cy")
    ana.expect(r" 472 ana x :is an unknown mode char")
    ana.expect(r" 696 ana #m l \* :This mode needs a parameter")
    ana.expect(r" 696 ana #m l many :")
    ana.expect(r" 401 ana cy :No such nick/channel")
    # +m: cy may not speak until voiced; operators may.
    cy = login_pass(srv.port, "cy", "pw-cy")
    join(cy, "cy", "#m")
    ana.send("MODE #m +m")
    cy.expect(r"^:ana!ana@yard MODE #m \+m$")
    cy.send("PRIVMSG #m :hello?")
    cy.expect(r" 404 cy #m :Cannot send to channel \(\+m")
    ana.send("MODE #m +v cy")
    cy.expect(r"^:ana!ana@yard MODE #m \+v cy$")
    cy.send("PRIVMSG #m :voiced now")
    ana.expect(r"^:cy!cy@yard PRIVMSG #m :voiced now$")
    assert names(ana, "ana", "#m") == ["+cy", "@ana", "@bo"]
    # KICK: the members and the kicked hear it; the kicked is out (+n keeps it out too).
    ana.send("KICK #m cy :too loud 📢")
    for c in (ana, bo, cy):
        c.expect(r"^:ana!ana@yard KICK #m cy :too loud 📢$")
    assert names(ana, "ana", "#m") == ["@ana", "@bo"]
    cy.send("PRIVMSG #m :still here?")
    cy.expect(r" 404 cy #m :Cannot send to channel \(\+n")
    ana.send("KICK #m cy")
    ana.expect(r" 441 ana cy #m ")
    # -n lets a non-member speak into the channel.
    ana.send("MODE #m -n")
    bo.expect(r"^:ana!ana@yard MODE #m -n$")
    cy.send("PRIVMSG #m :from outside")
    bo.expect(r"^:cy!cy@yard PRIVMSG #m :from outside$")
    # +i: only the invited (and the operators) join.
    ana.send("MODE #m +i")
    bo.expect(r"^:ana!ana@yard MODE #m \+i$")
    cy.send("JOIN #m")
    cy.expect(r" 473 cy #m :Cannot join channel \(\+i\)")
    cy.send("INVITE dee #m")
    cy.expect(r" 442 cy #m ")
    ana.send("INVITE cy #m", "INVITE bo #m", "INVITE nobody #m")
    ana.expect(r" 341 ana cy #m$")
    cy.expect(r"^:ana!ana@yard INVITE cy #m$")
    ana.expect(r" 443 ana bo #m :is already on channel")
    ana.expect(r" 401 ana nobody ")
    join(cy, "cy", "#m")
    # +k: the key is needed, and shown to members only; -k takes it away.
    ana.send("MODE #m -i+k s3cret")
    bo.expect(r"^:ana!ana@yard MODE #m -i\+k s3cret$")
    dee = login_pass(srv.port, "dee", "pw-dee")
    dee.send("MODE #m")
    dee.expect(r" 324 dee #m \+kmt \*$")
    dee.send("JOIN #m")
    dee.expect(r" 475 dee #m :Cannot join channel \(\+k\)")
    dee.send("JOIN #m wrong")
    dee.expect(r" 475 dee #m ")
    assert mode_of(ana, "ana", "#m") == "+kmt s3cret"
    # +l 3 with ana, bo and cy in: dee is one too many, even with the key.
    ana.send("MODE #m +l 3")
    bo.expect(r"^:ana!ana@yard MODE #m \+l 3$")
    dee.send("JOIN #m s3cret")
    dee.expect(r" 471 dee #m :Cannot join channel \(\+l\)")
    ana.send("MODE #m -lk *")
    bo.expect(r"^:ana!ana@yard MODE #m -lk \*$")
    join(dee, "dee", "#m")
    assert names(dee, "dee", "#m") == ["+cy", "@ana", "@bo", "dee"]
    # WHOIS shows the rank in each channel.
    dee.send("WHOIS bo")
    dee.expect(r" 319 dee bo :@#m$")
    for c in (ana, bo, cy, dee):
        c.close()


@pytest.mark.models(names=["epoll", "fork", "reactors"])
def test_modes_and_operators_survive_a_restart(chat, model):
    srv, data = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(ana, "ana", "#keep")
    join(bo, "bo", "#keep")
    ana.send("MODE #keep +imk+o ki bo")
    bo.expect(r"^:ana!ana@yard MODE #keep \+imko ki bo$")
    ana.send("MODE #keep +v bo")
    bo.expect(r"^:ana!ana@yard MODE #keep \+v bo$")
    ana.close()
    bo.close()
    srv.close()
    srv2, _ = chat(model, data=data)
    # The channel is empty, but its record stands: cy is kept out by +i, and bo, an
    # operator, comes in past +i and +k and is an operator again; ana too.
    cy = login_pass(srv2.port, "cy", "pw-cy")
    cy.send("JOIN #keep ki")
    cy.expect(r" 473 cy #keep ")
    bo = login_sasl(srv2.port, "bo", "pw-bo", caps="sasl multi-prefix")
    join(bo, "bo", "#keep")
    assert names(bo, "bo", "#keep") == ["@+bo"]
    assert mode_of(bo, "bo", "#keep") == "+ikmnt ki"
    ana = login_pass(srv2.port, "ana", "pw-ana")
    join(ana, "ana", "#keep")
    assert names(ana, "ana", "#keep") == ["@ana", "@bo"]   # no multi-prefix: the highest
    bo.send("WHO #keep")
    bo.expect(r" 352 bo #keep bo yard yard bo H@\+ :0 bo$")
    # A new channel named like nothing before: its creator is its operator again.
    join(cy, "cy", "#fresh")
    assert names(cy, "cy", "#fresh") == ["@cy"]
    for c in (ana, bo, cy):
        c.close()


def test_mode_kick_and_invite_are_in_the_log_but_not_in_history(chat):
    srv, data = chat("epoll")
    ana = login_sasl(srv.port, "ana", "pw-ana", caps="sasl batch server-time message-tags")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(ana, "ana", "#h")
    join(bo, "bo", "#h")
    ana.send("PRIVMSG #h :one", "MODE #h +v bo", "INVITE cy #h")
    ana.expect(r" 401 ana cy :No such nick")  # cy is not online yet: not invited, not logged
    cy = login_pass(srv.port, "cy", "pw-cy")
    ana.send("INVITE cy #h")
    cy.expect(r"^:ana!ana@yard INVITE cy #h$")
    ana.send("KICK #h bo :out", "PRIVMSG #h :two")
    bo.expect(r"^:ana!ana@yard KICK #h bo :out$")
    # The mode change came to ana with its tags (it is a log record with an id).
    ana.expect(r"^@time=\S+;msgid=\d+ :ana!ana@yard MODE #h \+v bo$")
    ana.send("CHATHISTORY LATEST #h * 10")
    ana.expect(r"BATCH \+\S+ chathistory #h")
    got = []
    while True:
        m = ana.expect(r"PRIVMSG #h :(\S+)$|BATCH -")
        if m.group(1) is None:
            break
        got.append(m.group(1))
    assert got == ["one", "two"]
    ana.close()
    bo.close()
    cy.close()
    srv.close()
    out = subprocess.run([CHAT, "log", "dump", "--data", str(data)], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    recs = [json.loads(ln) for ln in out.splitlines()]
    kinds = [(r["type"], r["target"], r["text"]) for r in recs
             if r["type"] in ("mode", "kick", "invite")]
    assert kinds == [("mode", "#h", "+v bo"), ("invite", "cy", "#h"), ("kick", "#h", "bo out")]
