"""MONITOR and bot mode in the chat service (issue 40), under every model: a connection
hears 730/731 when a nick it monitors comes and goes, whatever process that connection is
in (the online records go through the log); a bot's messages carry the bot tag."""

import pytest

from chatlib import Irc, accounts_fixture, chat_fixture, login_pass

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo")
chat = chat_fixture()


@pytest.mark.models(extra=["fork-pair"])
def test_monitor_and_bot_tag(chat, model):
    srv, _ = chat(model, "--guests")
    ana = login_pass(srv.port, "ana", "pw-ana")
    assert any("MONITOR=100" in ln and "BOT=B" in ln for ln in ana.lines if " 005 " in ln)
    ana.send("MONITOR + bo,zed")
    ana.expect(r"^:yard 731 ana :bo,zed$")
    bo = login_pass(srv.port, "bo", "pw-bo")
    ana.expect(r"^:yard 730 ana :bo!bo@yard$")
    zed = Irc(srv.port)
    zed.send("CAP LS 302", "CAP REQ :message-tags", "CAP END", "NICK zed", "USER z 0 * :Z")
    zed.expect(r" 001 zed ")
    ana.expect(r"^:yard 730 ana :zed!z@yard$")
    bo.send("MODE bo +B")
    bo.expect(r"^:bo!bo@yard MODE bo :\+B$")
    bo.send("PRIVMSG zed :beep")
    m = zed.expect(r"^@(\S+) :bo!bo@yard PRIVMSG zed :beep$")
    assert "bot" in m.group(1).split(";"), m.group(0)
    bo.send("QUIT :bye")
    ana.expect(r"^:yard 731 ana :bo$")
    zed.send("NICK zz")
    ana.expect(r"^:yard 731 ana :zed$")
    for c in (ana, zed):
        c.close()
