"""The chat service's query commands, answered from the shared member table under every
model: WHOIS, ISON, USERHOST, AWAY (and 301 to whoever writes to an away account), WHOWAS,
the keep-alive PINGs. LIST, LUSERS, VERSION, TIME, CAP LS's values and the welcome's 004 and
005 are checked without a server, in tests/unit/test_chat_server_info.c."""

import pytest

from chatlib import (accounts_fixture, chat_fixture, login_device, login_pass,
                     login_sasl)
from conftest import wait_for

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy")
chat = chat_fixture()


@pytest.mark.models(extra=["fork-pair"])
def test_whois_ison_userhost_and_away(chat, model):
    srv, _ = chat(model)
    a = login_pass(srv.port, "ana", "pw-ana")
    b = login_sasl(srv.port, "bo", "pw-bo")
    b.send("JOIN #x,#y")
    b.expect(r" 366 bo #y ")
    a.send("WHOIS BO")  # any spelling: the account's comes back
    a.expect(r" 311 ana bo bo yard \* :bo$")
    m = a.expect(r" 319 ana bo :(.*)$")
    assert sorted(m.group(1).split()) == ["@#x", "@#y"]   # bo made them: their operator
    a.expect(r" 312 ana bo yard ")
    a.expect(r" 330 ana bo bo :is logged in as$")
    a.expect(r" 318 ana bo :End of /WHOIS list\.$")
    a.send("WHOIS cy")  # an account that is not connected
    a.expect(r" 401 ana cy :No such nick/channel$")
    a.expect(r" 318 ana cy ")
    a.send("ISON bo cy nobody ANA")
    a.expect(r" 303 ana :bo ana$")
    a.send("USERHOST bo cy")
    a.expect(r" 302 ana :bo=\+bo@yard$")
    # AWAY: 306, then shown by WHOIS and USERHOST, and said to whoever writes to bo.
    b.send("AWAY :at lunch 🍜 обед")
    b.expect(r" 306 bo :You have been marked as being away$")
    a.send("WHOIS bo")
    a.expect(r" 301 ana bo :at lunch 🍜 обед$")
    a.expect(r" 318 ana bo ")
    a.send("USERHOST bo")
    a.expect(r" 302 ana :bo=-bo@yard$")
    a.send("PRIVMSG bo :are you there?")
    a.expect(r" 301 ana bo :at lunch 🍜 обед$")
    b.expect(r"^:ana!ana@yard PRIVMSG bo :are you there\?$")  # it is still delivered
    b.send("AWAY")
    b.expect(r" 305 bo :You are no longer marked as being away$")
    a.send("USERHOST bo")
    a.expect(r" 302 ana :bo=\+bo@yard$")
    a.close()
    b.close()


def test_an_account_is_away_only_when_every_device_is(chat):
    srv, _ = chat("epoll")
    a = login_pass(srv.port, "ana", "pw-ana")
    phone, desk = login_device(srv.port, "bo", "phone"), login_device(srv.port, "bo", "desk")
    phone.send("AWAY :phone in pocket")
    phone.expect(r" 306 ")
    a.send("USERHOST bo")
    a.expect(r" 302 ana :bo=\+bo@yard$")
    desk.send("AWAY :gone home")
    desk.expect(r" 306 ")
    a.send("USERHOST bo")
    a.expect(r" 302 ana :bo=-bo@yard$")
    a.send("WHOIS bo")
    a.expect(r" 301 ana bo :gone home$")  # the message set last
    a.expect(r" 318 ana bo ")
    desk.close()  # the device that is left is away: its message once the server sees desk go

    def phones_message():
        a.send("WHOIS bo")
        m = a.expect(r" 301 ana bo :(.*)$")
        a.expect(r" 318 ana bo ")
        return m.group(1) == "phone in pocket"
    wait_for(phones_message, what="WHOIS to show the phone's message")
    for c in (a, phone):
        c.close()


@pytest.mark.models(extra=["fork-pair"])
def test_a_silent_client_is_pinged_and_closed_one_that_answers_stays(chat, model):
    srv, _ = chat(model, "--ping-interval-ms", "300", "--ping-timeout-ms", "400")
    silent = login_pass(srv.port, "ana", "pw-ana")
    lively = login_pass(srv.port, "bo", "pw-bo")
    silent.expect(r"^PING :yard$", timeout=5)
    lively.expect(r"^PING :yard$", timeout=5)
    lively.send("PONG :yard")
    silent.expect(r"^ERROR :Closing Link: ana \(Ping timeout: \d+ seconds\)$", timeout=5)
    assert silent.wait_closed(5)
    # The one that answered is pinged again later and is still served.
    lively.expect(r"^PING :yard$", timeout=5)
    lively.send("PONG :yard", "ISON ana bo")
    lively.expect(r" 303 bo :bo$")
    lively.close()


def test_ping_interval_zero_never_pings(chat):
    srv, _ = chat("epoll", "--ping-interval-ms", "0", "--ping-timeout-ms", "1")
    a = login_pass(srv.port, "ana", "pw-ana")
    b = login_pass(srv.port, "bo", "pw-bo")
    # bo's later login and ana's answer prove time passed with ana silent and served
    b.send("PING :x")
    b.expect(r"PONG")
    a.send("ISON bo")
    a.expect(r" 303 ana :bo$")
    assert not any(line.startswith("PING") for line in a.lines)
    a.close()
    b.close()


@pytest.mark.models(extra=["fork-pair"])
def test_a_client_that_closes_is_gone_though_the_ping_timer_is_armed(chat, model):
    # The liveness timer only watches an idle connection: it must not keep one whose
    # client has closed (it did, until the timer fired minutes later).
    srv, _ = chat(model)
    a = login_pass(srv.port, "ana", "pw-ana")
    b = login_pass(srv.port, "bo", "pw-bo")
    b.close()

    def gone():
        a.send("ISON bo")
        return a.expect(r" 303 ana :(.*)$").group(1) == ""
    wait_for(gone, what="bo's closed connection to be gone")
    a.send("LUSERS")
    a.expect(r" 255 ana :I have 1 clients and 0 servers$")
    a.close()


@pytest.mark.models(extra=["fork-pair"])
def test_whowas_remembers_an_account_once_its_last_connection_ends(chat, model):
    srv, _ = chat(model)
    a = login_pass(srv.port, "ana", "pw-ana")
    b1, b2 = login_device(srv.port, "bo", "phone"), login_device(srv.port, "bo", "desk")
    a.send("WHOWAS bo")
    a.expect(r" 406 ana bo :There was no such nickname$")
    a.expect(r" 369 ana bo :End of WHOWAS$")
    b1.close()  # bo is still online on the desk: not gone yet
    b2.send("PING :x")
    b2.expect("PONG")

    def whowas_bo():
        a.send("WHOWAS bo")
        m = a.expect(r" (406|314) ana bo ")
        a.expect(r" 369 ana bo ")
        return m.group(1) == "314"
    # While the desk is connected bo never shows up; once it closes, bo does.
    assert not whowas_bo()
    b2.close()
    wait_for(whowas_bo, what="bo in WHOWAS")
    a.send("WHOWAS bo")
    # USER's name of the connection that went last: the desk, unless the
    # server took the phone's close after the desk's (nothing orders them).
    a.expect(r" 314 ana bo (desk|phone) yard \* :bo$")
    a.expect(r" 312 ana bo yard :\d{4}-\d\d-\d\dT")
    a.close()
