"""IRCv3 capabilities of the chat service, under every model: message-tags (msgid = the log's
id), account-tag, server-time, extended-join, away-notify, a JOIN's replay as a chathistory
batch, read markers, and account-notify. CAP LS/REQ/LIST are checked without a server, in
tests/unit/test_chat_server_info.c."""

import base64
import json
import re
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_pass, login_sasl

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy")
chat = chat_fixture()

def tags_of(line):
    m = re.match(r"^@(\S+) ", line)
    return dict(t.split("=", 1) for t in m.group(1).split(";")) if m else {}


@pytest.mark.models(extra=["fork-pair"])
def test_tags_extended_join_and_away_notify(chat, model):
    srv, data = chat(model)
    ana = login_sasl(srv.port, "ana", "pw-ana",
                     caps="sasl message-tags account-tag server-time extended-join away-notify")
    plain = login_pass(srv.port, "cy", "pw-cy")  # no capabilities: none of it
    for c, nick in ((ana, "ana"), (plain, "cy")):
        c.send("JOIN #v,#w")
        c.expect(rf" 366 {nick} #w ")
    assert ":ana!ana@yard JOIN #v ana :ana" in ana.lines  # her own, extended
    bo = login_pass(srv.port, "bo", "pw-bo")
    bo.send("JOIN #v,#w")
    bo.expect(r" 366 bo #w ")
    join = ana.expect(r"^(@\S+ ):bo!bo@yard JOIN #v bo :bo$")
    assert set(tags_of(join.group(0))) == {"time", "msgid", "account"}
    plain.expect(r"^:bo!bo@yard JOIN #v$")
    bo.send("PRIVMSG #v :hi ✨")
    line = ana.expect(r"^@\S+ :bo!bo@yard PRIVMSG #v :hi ✨$").group(0)
    tags = tags_of(line)
    assert tags["account"] == "bo" and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$",
                                                tags["time"])
    plain.expect(r"^:bo!bo@yard PRIVMSG #v :hi ✨$")
    # away-notify: bo shares #v and #w with ana; she is told once per change.
    bo.send("AWAY :обед 🍜")
    bo.expect(r" 306 ")
    ana.expect(r"^@\S+ :bo!bo@yard AWAY :обед 🍜$")
    bo.send("AWAY")
    bo.expect(r" 305 ")
    ana.expect(r"^@\S+ :bo!bo@yard AWAY$")
    bo.send("PRIVMSG #v :marker", "PING logged")
    bo.expect(r" PONG yard :logged$")
    ana.expect(r"PRIVMSG #v :marker$")
    plain.expect(r"PRIVMSG #v :marker$")
    assert sum(":bo!bo@yard AWAY" in ln for ln in ana.lines) == 2
    assert not any(":bo!bo@yard AWAY" in ln for ln in plain.lines)
    # msgid is the log's id.
    r = subprocess.run([CHAT, "log", "dump", "--data", str(data)], capture_output=True,
                       text=True, timeout=30)
    ids = {rec["text"]: rec["id"] for rec in map(json.loads, r.stdout.splitlines())
           if rec["type"] == "message"}
    assert tags["msgid"] == str(ids["hi ✨"])
    for c in (ana, bo, plain):
        c.close()


def test_join_replay_is_a_batch(chat):
    srv, _ = chat("epoll")
    bo = login_sasl(srv.port, "bo", "pw-bo", caps="sasl batch server-time")
    bo.send("JOIN #h")
    bo.expect(r" 366 bo #h ")
    bo.send("PART #h")
    bo.expect(r" PART #h")
    ana = login_pass(srv.port, "ana", "pw-ana")
    ana.send("JOIN #h", *[f"PRIVMSG #h :missed {k}" for k in range(3)], "PING x")
    ana.expect(r" PONG yard :x$")
    bo.send("JOIN #h")
    start = bo.expect(r"^:yard BATCH \+(\S+) chathistory #h$")
    ref = start.group(1)
    got = bo.collect(rf"^@time=\S+;batch={re.escape(ref)} :ana!ana@yard PRIVMSG #h :missed (\d)$", 3)
    assert [m.group(1) for m in got] == ["0", "1", "2"]
    bo.expect(rf"^:yard BATCH -{re.escape(ref)}$")
    for c in (ana, bo):
        c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_read_marker(chat, model):
    """draft/read-marker: MARKREAD moves the account's marker forward only, every connection
    of the account with the capability hears it, JOIN says where it is, and it survives a
    restart."""
    srv, data = chat(model)
    caps = "sasl draft/read-marker"
    phone, desk = (login_sasl(srv.port, "ana", "pw-ana", caps=caps) for _ in range(2))
    plain = login_sasl(srv.port, "ana", "pw-ana")  # no read-marker
    phone.send("JOIN #m")
    phone.expect(r" 353 ana = #m :")
    phone.expect(r"^:yard MARKREAD #m \*$")  # before NAMES' end: no marker yet
    phone.expect(r" 366 ana #m ")
    t1, t0 = "2026-01-02T03:04:05.678Z", "2025-01-01T00:00:00.000Z"
    phone.send(f"MARKREAD #M timestamp={t1}")
    for c in (phone, desk):
        c.expect(rf"^:yard MARKREAD #M timestamp={t1}$")
    desk.send(f"MARKREAD #m timestamp={t0}")  # older: not moved back; the current one
    desk.expect(rf"^:yard MARKREAD #m timestamp={t1}$")
    desk.send("MARKREAD bo")
    desk.expect(r"^:yard MARKREAD bo \*$")
    desk.send("MARKREAD")
    desk.expect(r"^:yard FAIL MARKREAD NEED_MORE_PARAMS :")
    for bad in ("MARKREAD #m yesterday", "MARKREAD #m timestamp=2026-13-45T99:00Z",
                "MARKREAD no,such"):
        desk.send(bad)
        desk.expect(r"^:yard FAIL MARKREAD INVALID_PARAMS ")
    plain.send("PING x")
    plain.expect(r" PONG yard :x$")
    assert not any("MARKREAD" in ln for ln in plain.lines)
    for c in (phone, desk, plain):
        c.close()
    srv.close()
    srv2, _ = chat(model, data=data)
    c = login_sasl(srv2.port, "ana", "pw-ana", caps=caps)
    c.send("MARKREAD #m")
    c.expect(rf"^:yard MARKREAD #m timestamp={t1}$")
    c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_away_members_on_join(chat, model):
    """away-notify and JOIN: an away account that joins is told as away after its JOIN, and a
    client that joins hears which members are away, after NAMES."""
    srv, _ = chat(model)
    ana = login_sasl(srv.port, "ana", "pw-ana", caps="sasl away-notify")
    ana.send("JOIN #aw")
    ana.expect(r" 366 ana #aw ")
    bo = login_pass(srv.port, "bo", "pw-bo")
    bo.send("AWAY :brb ☕")
    bo.expect(r" 306 ")
    bo.send("JOIN #aw")
    bo.expect(r" 366 bo #aw ")
    ana.expect(r"^:bo!bo@yard JOIN #aw$")
    ana.expect(r"^:bo!bo@yard AWAY :brb ☕$")
    cy = login_sasl(srv.port, "cy", "pw-cy", caps="sasl away-notify")
    cy.send("JOIN #aw")
    cy.expect(r" 366 cy #aw ")
    cy.expect(r"^:bo!bo@yard AWAY :brb ☕$")
    cy.send("PING x")
    cy.expect(r" PONG yard :x$")
    assert [ln for ln in cy.lines if " AWAY " in ln] == [":bo!bo@yard AWAY :brb ☕"]
    for c in (ana, bo, cy):
        c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_client_only_tags_and_tagmsg(chat, model):
    """message-tags: a client's '+' tags are kept with its message (in the log) and relayed
    to the clients that take tags; the server's own tags cannot be forged; TAGMSG carries
    tags only, to those clients only; CHATHISTORY gives the tags back."""
    srv, data = chat(model)
    ana = login_sasl(srv.port, "ana", "pw-ana", caps="sasl message-tags echo-message")
    bo = login_sasl(srv.port, "bo", "pw-bo", caps="sasl message-tags batch")
    cy = login_pass(srv.port, "cy", "pw-cy")  # no message-tags: plain lines, no TAGMSG
    for c, nick in ((ana, "ana"), (bo, "bo"), (cy, "cy")):
        c.send("JOIN #t")
        c.expect(rf" 366 {nick} #t ")
    ana.send("@+typing=active;time=2001-01-01T00:00:00.000Z;msgid=forged;+draft/react=👍 "
             "TAGMSG #t")
    line = bo.expect(r"^@\S+ :ana!ana@yard TAGMSG #t$").group(0)
    tags = tags_of(line)
    assert tags["+typing"] == "active" and tags["+draft/react"] == "👍"
    assert tags["msgid"].isdigit() and "time" not in tags   # the log's id; no forged time
    tagmsg_id = tags["msgid"]
    ana.expect(r"^@\S+ :ana!ana@yard TAGMSG #t$")             # echo-message
    ana.send(f"@+draft/reply={tagmsg_id};+x=1;+x=2 PRIVMSG #t :re: 👀")
    line = bo.expect(r"^@\S+ :ana!ana@yard PRIVMSG #t :re: 👀$").group(0)
    tags = tags_of(line)
    assert (tags["+draft/reply"], tags["+x"]) == (tagmsg_id, "2")   # a key once: its last value
    # cy hears the message plainly, and no TAGMSG before it.
    cy.expect(r"^:ana!ana@yard PRIVMSG #t :re: 👀$")
    assert not [ln for ln in cy.lines if "TAGMSG" in ln or ln.startswith("@")]
    # Tags from a client without message-tags are not taken.
    cy.send("@+typing=done PRIVMSG #t :plain")
    assert "+typing" not in tags_of(bo.expect(r" PRIVMSG #t :plain$").group(0))
    # IRCv3's limit, irctest's sizes: 4094 bytes of tag data are taken, their client-only
    # tags kept in the log whole; one byte more is 417, nothing sent.
    big = "a" * 4081
    ana.send(f"@foo=bar;+baz={big} PRIVMSG #t :" + "b" * 400)
    line = bo.expect(r"^@\S+ :ana!ana@yard PRIVMSG #t :b{400}$").group(0)
    assert tags_of(line)["+baz"] == big and "foo" not in tags_of(line)
    ana.send(f"@foo=bar;+baz={big}a PRIVMSG #t :too many tags")
    ana.expect(r" 417 ana :Input line was too long \(tag data: at most 4094 bytes\)")
    # CHATHISTORY gives the messages back with their tags; the TAGMSG is not history.
    bo.send("CHATHISTORY LATEST #t * 10")
    bo.expect(r"BATCH \+\S+ chathistory #t")
    got = []
    while (m := bo.expect(r"^(@\S+ )?:\S+ (\S+) #t( :.*)?$|BATCH -")).group(2):
        tags = tags_of(m.group(0))
        got.append((m.group(2), tags.get("+x"), len(tags.get("+baz", "")), m.group(3)))
    assert got == [("PRIVMSG", "2", 0, " :re: 👀"), ("PRIVMSG", None, 0, " :plain"),
                   ("PRIVMSG", None, 4081, " :" + "b" * 400)]
    for c in (ana, bo, cy):
        c.close()
    srv.close()
    out = subprocess.run([CHAT, "log", "dump", "--data", str(data)], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    recs = [json.loads(ln) for ln in out.splitlines()]
    tagged = [(r["type"], r.get("tags"), r["text"]) for r in recs if r["type"] in
              ("message", "tagmsg")]
    assert tagged == [("tagmsg", "+typing=active;+draft/react=👍", ""),
                      ("message", f"+draft/reply={tagmsg_id};+x=2", "re: 👀"),
                      ("message", None, "plain"),
                      ("message", "+baz=" + "a" * 4081, "b" * 400)]


def answer_lines(c, last: str) -> list[str]:
    """The lines c receives from now up to and including the one matching last."""
    first = c.pos
    c.expect(last)
    return c.lines[first:c.pos]


@pytest.mark.models(extra=["fork-pair"])
def test_labeled_response(chat, model):
    """labeled-response: a labeled CHATHISTORY's chathistory batch inside the labeled-response
    batch (answered by the scan lane's job), one line labeled (PING), none acknowledged (PONG),
    an echo labeled (it comes back through the log) and the recipient's copy not."""
    srv, _ = chat(model)
    caps = "sasl batch labeled-response echo-message"
    ana = login_sasl(srv.port, "ana", "pw-ana", caps=caps)
    bo = login_sasl(srv.port, "bo", "pw-bo", caps=caps)
    for c, nick in ((ana, "ana"), (bo, "bo")):
        c.send("JOIN #l")
        c.expect(rf" 366 {nick} #l ")
    bo.send("PRIVMSG #l :one", "PRIVMSG #l :two")
    ana.expect(r"^:bo!bo@yard PRIVMSG #l :two$")
    ana.send("@label=h1 CHATHISTORY LATEST #l * 10")
    got = answer_lines(ana, r"^:yard BATCH -L")
    outer = re.match(r"^@label=h1 :yard BATCH \+(\S+) labeled-response$", got[0]).group(1)
    inner = re.match(rf"^@batch={outer} :yard BATCH \+(\S+) chathistory #l$", got[1]).group(1)
    assert got[2:] == [f"@batch={inner} :bo!bo@yard PRIVMSG #l :one",
                       f"@batch={inner} :bo!bo@yard PRIVMSG #l :two",
                       f"@batch={outer} :yard BATCH -{inner}",
                       f":yard BATCH -{outer}"]
    ana.send("@label=p PING x")
    assert re.match(r"^@label=p :yard PONG \S+ :x$", answer_lines(ana, r" PONG ")[0])
    ana.send("@label=a PONG x")
    assert answer_lines(ana, r" ACK$") == ["@label=a :yard ACK"]
    ana.send("@label=e PRIVMSG bo :hi")
    assert answer_lines(ana, r" PRIVMSG bo :hi$") == ["@label=e :ana!ana@yard PRIVMSG bo :hi"]
    assert bo.expect(r"^.*PRIVMSG bo :hi$").group(0) == ":ana!ana@yard PRIVMSG bo :hi"
    # To oneself: delivered and echoed, only the echo labeled.
    ana.send("@label=s PRIVMSG ana :me", "PING done")
    got = answer_lines(ana, r" PONG \S+ :done$")
    assert got[:2] == [":ana!ana@yard PRIVMSG ana :me", "@label=s :ana!ana@yard PRIVMSG ana :me"]
    for c in (ana, bo):
        c.close()


@pytest.mark.models()
def test_setname(chat, model):
    """setname: the sender hears its SETNAME at once, a member sharing a channel with the
    capability through the log (from another process under fork), one without it nothing;
    WHOIS shows the new realname."""
    srv, _ = chat(model)
    ana = login_sasl(srv.port, "ana", "pw-ana", caps="sasl setname")
    bo = login_sasl(srv.port, "bo", "pw-bo", caps="sasl setname")
    cy = login_pass(srv.port, "cy", "pw-cy")
    for c, nick in ((ana, "ana"), (bo, "bo"), (cy, "cy")):
        c.send("JOIN #n")
        c.expect(rf" 366 {nick} #n ")
    ana.send("SETNAME :Ana Lyse")
    ana.expect(r"^:ana!ana@yard SETNAME :Ana Lyse$")
    bo.expect(r"^:ana!ana@yard SETNAME :Ana Lyse$")
    cy.send("WHOIS ana")
    cy.expect(r" 311 cy ana \S+ yard \* :Ana Lyse$")
    bo.send("PRIVMSG #n :after")  # cy hears this, and no SETNAME before it
    cy.expect(r"PRIVMSG #n :after$")
    assert not [ln for ln in cy.lines if "SETNAME" in ln]
    for c in (ana, bo, cy):
        c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_account_notify(chat, model):
    """A guest that logs in with SASL after registering is told as ACCOUNT, through the
    log, to the members of its channel with account-notify (in whatever process they
    are) and to a watcher with extended-monitor; not to a member without the capability."""
    srv, _ = chat(model, "--guests")
    clients = {}
    for nick, caps in (("zed", None), ("wat", "account-notify account-tag"), ("nocap", None),
                       ("mon", "extended-monitor account-notify")):
        c = Irc(srv.port)
        if caps:
            c.send("CAP LS 302", f"CAP REQ :{caps}", "CAP END")
        c.send(f"NICK {nick}", f"USER u{nick} 0 * :{nick}")
        c.expect(rf" 001 {nick} ")
        clients[nick] = c
    zed, wat, nocap, mon = clients["zed"], clients["wat"], clients["nocap"], clients["mon"]
    for c, nick in ((zed, "zed"), (wat, "wat"), (nocap, "nocap")):
        c.send("JOIN #acc")
        c.expect(rf" 366 {nick} #acc ")
    mon.send("MONITOR + zed")
    mon.expect(r"^:yard 730 mon :zed!uzed@yard$")
    zed.send("CAP REQ :sasl", "AUTHENTICATE PLAIN")
    zed.expect(r"^AUTHENTICATE \+")
    zed.send("AUTHENTICATE " + base64.b64encode(b"\0ana\0pw-ana").decode())
    zed.expect(r"^:yard 900 zed zed!zed@yard ana ")
    wat.expect(r"^@account=ana :zed!zed@yard ACCOUNT ana$")
    mon.expect(r"^:zed!zed@yard ACCOUNT ana$")
    zed.send("PRIVMSG #acc :now ana")
    wat.expect(r"^@account=ana :zed!zed@yard PRIVMSG #acc :now ana$")
    nocap.expect(r"^:zed!zed@yard PRIVMSG #acc :now ana$")
    assert not [ln for ln in nocap.lines if " ACCOUNT " in ln], nocap.lines
    assert not [ln for ln in zed.lines if " ACCOUNT " in ln], zed.lines
    for c in clients.values():
        c.close()
