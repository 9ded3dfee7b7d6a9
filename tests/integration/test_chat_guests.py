"""Guests in the chat service (issue 19): with --guests, NICK + USER without credentials
registers a guest; accounts' names stay theirs (433 with a hint to log in); guests change
nicks (relayed), talk in channels and privately, have no read positions, markers or
private history; +R keeps them out and +M voiceless; their own limits per address;
without --guests, today's refusal. Under every model, and with a third-party IRC library
(the `irc` package from PyPI)."""

import time

import pytest

from chatlib import Irc, accounts_fixture, chat_fixture, login_pass, login_sasl

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo")
chat = chat_fixture()


def guest(port, nick, source=None, realname=None):
    c = Irc(port, source=source)
    c.send(f"NICK {nick}", f"USER {nick} 0 * :{realname or nick}")
    return c


def join(c, nick, chan):
    c.send(f"JOIN {chan}")
    c.expect(rf" 366 {nick} {chan} ")


@pytest.mark.models(extra=["fork-pair"])
def test_guests_register_talk_and_change_nicks(chat, model):
    srv, _ = chat(model, "--guests")
    ana = login_sasl(srv.port, "ana", "pw-ana", caps="sasl account-tag extended-join")
    join(ana, "ana", "#pub")                      # ana made #pub: its operator
    # A guest may not take an account's name: 433 with the hint, then another nick.
    z = guest(srv.port, "ANA", realname="Zed Ü")
    z.expect(r" 433 \* ANA :Nickname is reserved for an account: log in")
    z.send("NICK zed")
    z.expect(r" 001 zed ")
    z.expect(r" 005 zed .*CHANMODES=beI,k,l,MRimnst")
    # Nobody else gets a nick that is connected.
    y = guest(srv.port, "Zed")
    y.expect(r" 433 \* Zed :Nickname is already in use")
    y.send("NICK yan")
    y.expect(r" 001 yan ")
    join(z, "zed", "#pub")
    ana.expect(r"^:zed!zed@yard JOIN #pub \* :Zed Ü$")   # extended-join: not logged in
    z.send("PRIVMSG #pub :hello from a guest 👋")
    line = ana.expect(r":zed!zed@yard PRIVMSG #pub :hello from a guest 👋$").group(0)
    assert "account=" not in line                        # account-tag: none for a guest
    ana.send("WHOIS zed")
    ana.expect(r" 311 ana zed ANA yard \* :Zed Ü$")   # USER's user name and realname
    ana.expect(r" 318 ana zed ")
    assert not [ln for ln in ana.lines if " 330 ana zed " in ln]
    # Private messages both ways, live.
    ana.send("PRIVMSG zed :psst")
    z.expect(r"^:ana!ana@yard PRIVMSG zed :psst$")
    z.send("PRIVMSG ana :hi ana")
    ana.expect(r":zed!zed@yard PRIVMSG ana :hi ana$")
    # Nick changes: told to the guest and to the channel; taken, reserved and bad nicks.
    z.send("NICK zeta")
    z.expect(r"^:zed!zed@yard NICK :zeta$")
    ana.expect(r"^:zed!zed@yard NICK :zeta$")
    z.send("NICK yan", "NICK bo", "NICK 9lives")
    z.expect(r" 433 zeta yan :Nickname is already in use")
    z.expect(r" 433 zeta bo :Nickname is reserved")
    z.expect(r" 432 zeta 9lives :Erroneous nickname")
    z.send("PRIVMSG #pub :still me")
    ana.expect(r":zeta!zeta@yard PRIVMSG #pub :still me$")
    # No account: read markers held for the connection only, no private history;
    # the channel's history is there.
    z.send("MARKREAD #pub", "CHATHISTORY LATEST ana * 10", "CHATHISTORY LATEST #pub * 10")
    z.expect(r"^:yard MARKREAD #pub \*$")
    z.expect(r"FAIL CHATHISTORY INVALID_TARGET LATEST ana ")
    z.expect(r":zeta!zeta@yard PRIVMSG #pub :still me$")
    # A guest's rank lasts while it is in the channel; +M mutes guests, +R keeps them out.
    ana.send("MODE #pub +v zeta", "MODE #pub -v zeta")
    ana.expect(r":ana!ana@yard MODE #pub \+v zeta$")
    ana.expect(r":ana!ana@yard MODE #pub -v zeta$")
    ana.send("MODE #pub +MR")
    z.expect(r"^:ana!ana@yard MODE #pub \+MR$")
    z.send("PRIVMSG #pub :can I?")
    z.expect(r" 404 zeta #pub :Cannot send to channel \(\+M")
    y.send("JOIN #pub")
    y.expect(r" 477 yan #pub :Cannot join channel \(\+R\)")
    bo = login_pass(srv.port, "bo", "pw-bo")
    join(bo, "bo", "#pub")                               # accounts still come in
    # A guest that creates a channel is its operator.
    join(y, "yan", "#yans")
    y.send("NAMES #yans")
    y.expect(r" 353 yan = #yans :@yan$")
    # A guest that leaves and comes back is not replayed what it missed (no position).
    z.send("PART #pub")
    z.expect(r"PART #pub")
    bo.send("PRIVMSG #pub :while zeta was out")
    ana.expect(r"PRIVMSG #pub :while zeta was out$")
    ana.send("MODE #pub -R")
    ana.expect(r"MODE #pub -R$")
    join(z, "zeta", "#pub")
    z.send("PING :marker")
    z.expect(r"PONG yard :marker$")
    assert not [ln for ln in z.lines if "while zeta was out" in ln]
    for c in (ana, z, y, bo):
        c.close()


@pytest.mark.models(names=["epoll", "fork", "thread"])
def test_guest_limits_channels_and_addresses(chat, model):
    srv, _ = chat(model, "--guests", "--guests-may-create-channels", "off",
                  "--guests-per-addr", "2")
    ana = login_pass(srv.port, "ana", "pw-ana")
    join(ana, "ana", "#made")
    a = guest(srv.port, "ga", source="127.0.0.1")
    a.expect(r" 001 ga ")
    a.send("JOIN #new")
    a.expect(r" 403 ga #new :No such channel \(guests may not create channels here\)")
    join(a, "ga", "#made")                              # one that exists is fine
    b = guest(srv.port, "gb", source="127.0.0.1")
    b.expect(r" 001 gb ")
    c = guest(srv.port, "gc", source="127.0.0.1")       # a third from the address: refused
    c.expect(r"^ERROR :Closing Link: too many guests from 127\.0\.0\.1 \(--guests-per-addr 2\)")
    assert c.wait_closed()
    d = guest(srv.port, "gd", source="127.0.0.2")       # another address has its own share
    d.expect(r" 001 gd ")
    b.close()                                           # a guest gone gives its place back
    ana.send("PING :x")                                 # (the close is seen by then)
    ana.expect(r"PONG")
    deadline = time.monotonic() + 10
    while True:
        e = guest(srv.port, "ge", source="127.0.0.1")
        m = e.expect(r" 001 ge |^ERROR ")
        if " 001 " in m.group(0) or time.monotonic() > deadline:
            break
        e.close()
    assert " 001 " in m.group(0)
    for x in (ana, a, d, e):
        x.close()


@pytest.mark.models(names=["epoll", "fork", "thread"])
def test_guests_take_at_most_their_share_of_the_channel_table(chat, model):
    """Issue 44: guests filling the channel table locked accounts out of new channels. With
    --max-channels 4 and --guests-channel-share 50, guests' new channels stop at 2; an
    account still creates its own; a guests' channel an account joins stops counting; a
    channel that empties gives its place back."""
    srv, _ = chat(model, "--guests", "--max-channels", "4", "--guests-channel-share", "50")
    g = guest(srv.port, "gx")
    g.expect(r" 001 gx ")
    join(g, "gx", "#g1")
    join(g, "gx", "#g2")
    g.send("JOIN #g3")
    g.expect(r" 405 gx #g3 :The server holds no more channels made by guests "
             r"\(--guests-channel-share 50% of 4\)")
    h = guest(srv.port, "gy", source="127.0.0.2")  # the share is the server's, not a guest's
    h.expect(r" 001 gy ")
    h.send("JOIN #g4")
    h.expect(r" 405 gy #g4 :The server holds no more channels made by guests")
    join(h, "gy", "#g1")                           # joining a guests' channel is fine
    ana = login_pass(srv.port, "ana", "pw-ana")
    join(ana, "ana", "#a1")                        # an account finds room
    join(ana, "ana", "#g2")                        # #g2 is no longer only the guests'
    join(g, "gx", "#g3")                           # so a guest may make one more
    ana.send("JOIN #a2")                           # the table itself is full now (4 of 4)
    ana.expect(r" 405 ana #a2 :The server holds no more channels \(--max-channels\)")
    g.send("PART #g3")
    g.expect(r"^:gx!gx@yard PART #g3")
    join(h, "gy", "#g6")                           # an emptied guests' channel gave its place
    for x in (g, h, ana):
        x.close()


def test_a_guest_flood_is_bounded_like_an_accounts(chat):
    """400 lines at once from a guest, --flood-burst 100 and --flood-rate 100: the first
    100 are relayed at once, the rest no faster than 100 a second."""
    srv, _ = chat("epoll", "--guests", "--flood-burst", "100", "--flood-rate", "100")
    ana = login_pass(srv.port, "ana", "pw-ana")
    join(ana, "ana", "#f")
    g = guest(srv.port, "gflood")
    g.expect(r" 001 gflood ")
    join(g, "gflood", "#f")
    t0 = time.monotonic()
    g.send(*[f"PRIVMSG #f :flood {i}" for i in range(400)])
    got = ana.collect(r":gflood!gflood@yard PRIVMSG #f :flood (\d+)$", 400, timeout=20)
    elapsed = time.monotonic() - t0
    assert [int(m.group(1)) for m in got] == list(range(400))   # all of it, in order
    assert elapsed >= 2.5, f"400 lines relayed in {elapsed:.2f} s: faster than the limit"
    for c in (ana, g):
        c.close()


def test_a_third_party_irc_library_as_guest_and_account(chat):
    """jaraco's `irc` package (PyPI) as a client would use it: a guest and an account
    connect, join one channel and hear each other."""
    import irc.client as irc_client   # tests/requirements.txt installs it; missing is a failure
    srv, _ = chat("epoll", "--guests")
    reactor = irc_client.Reactor()
    heard = {"lib-guest": [], "ana": []}
    joined = set()

    def on_welcome(conn, event):
        conn.join("#lib")

    def on_join(conn, event):
        if event.source.nick == conn.get_nickname():   # its own JOIN: it is in
            joined.add(conn.get_nickname())

    def on_pubmsg(conn, event):
        heard[conn.get_nickname()].append((event.source.nick, event.arguments[0]))

    reactor.add_global_handler("welcome", on_welcome)
    reactor.add_global_handler("join", on_join)
    reactor.add_global_handler("pubmsg", on_pubmsg)
    guest_conn = reactor.server().connect("127.0.0.1", srv.port, "lib-guest")
    account_conn = reactor.server().connect("127.0.0.1", srv.port, "ana", password="pw-ana")
    said = False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        reactor.process_once(0.1)
        if joined == {"lib-guest", "ana"} and not said:
            guest_conn.privmsg("#lib", "hello from the library")
            account_conn.privmsg("#lib", "and from ana ✓")
            said = True
        if heard["lib-guest"] and heard["ana"]:
            break
    assert heard["ana"] == [("lib-guest", "hello from the library")]
    assert heard["lib-guest"] == [("ana", "and from ana ✓")]
    guest_conn.close()
    account_conn.close()


@pytest.mark.models(extra=["fork-pair"])
def test_a_guest_logs_in_and_becomes_the_account(chat, model):
    """SASL (after CAP REQ sasl) or PASS account:password turn a guest into the account, in
    the channels it is in, keeping its nick (issue 40) unless the account is connected
    elsewhere: then it takes the nick the account's connections share, and the members
    hear the change; a wrong password leaves a guest a guest."""
    import base64
    srv, _ = chat(model, "--guests")
    ana = login_pass(srv.port, "ana", "pw-ana")
    join(ana, "ana", "#up")
    g = Irc(srv.port)
    g.send("CAP LS 302", "NICK visitor", "USER phone 0 * :Visitor")
    g.expect(r"CAP \* LS ")
    g.send("CAP REQ :sasl", "CAP END")
    g.expect(r" 001 visitor ")
    join(g, "visitor", "#up")
    ana.expect(r"^:visitor!visitor@yard JOIN #up$")
    g.send("AUTHENTICATE PLAIN")
    g.expect(r"^AUTHENTICATE \+$")
    g.send("AUTHENTICATE " + base64.b64encode(b"\0bo\0wrong").decode())
    g.expect(r" 904 visitor :SASL authentication failed")
    g.send("AUTHENTICATE PLAIN")
    g.expect(r"^AUTHENTICATE \+$")
    g.send("AUTHENTICATE " + base64.b64encode(b"\0bo\0pw-bo").decode())
    g.expect(r" 900 visitor visitor!visitor@yard bo :You are now logged in as bo")
    g.expect(r" 903 visitor :SASL authentication successful")
    g.send("PRIVMSG #up :now as bo")
    ana.expect(r"^:visitor!visitor@yard PRIVMSG #up :now as bo$")
    assert not [ln for ln in g.lines + ana.lines if " NICK " in ln]
    ana.send("WHOIS visitor")
    ana.expect(r" 330 ana visitor bo :is logged in as")
    g.send("MARKREAD #up")                               # an account now: it has a marker
    g.expect(r"MARKREAD #up (timestamp=|\*)")
    # PASS account:password from a guest with a nick of its own.
    h = guest(srv.port, "walker")
    h.expect(r" 001 walker ")
    h.send("PASS ana:nope")
    h.expect(r" 904 walker ")
    h.send("PASS ana:pw-ana")
    h.expect(r"^:walker!walker@yard NICK :ana$")
    h.expect(r" 900 ana ")
    for c in (ana, g, h):
        c.close()
