"""The server password (issue 40): `yard-chat server-password set|clear` keeps a bcrypt hash
in DIR/server-password (0600, the password never on the command line), and
`yard-serve --app chat --server-password-required` checks PASS against it before a client
registers: the right one lets a guest in, and an account with SASL; a wrong or missing one
is 464 and ERROR, then the connection is closed. A new password set while the server runs
applies to the next registrations. Without the flag PASS stays an account's password."""

import base64
import stat
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_pass
from conftest import BIN

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana")
chat = chat_fixture()
FLAGS = ("--server-password-required", "--guests", "--login-fail-delay-ms", "100")


def server_password(*args, password=None):
    return subprocess.run([CHAT, "server-password", *map(str, args)], input=password,
                          capture_output=True, text=True, timeout=30)


def set_password(data, password):
    r = server_password("set", "--data", data, "--cost", 4, password=password + "\n")
    assert r.returncode == 0, r.stderr


def test_the_tool(tmp_path):
    data = tmp_path / "d"
    set_password(data, "s3rver")
    f = data / "server-password"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    text = f.read_text()
    assert text.startswith("$2b$04$") and len(text) == 61 and "s3rver" not in text
    r = server_password("set", "s3rver", "--data", data)
    assert r.returncode == 2 and "never from the command line" in r.stderr
    r = server_password("set", "--data", data, password="")
    assert r.returncode == 1 and "expected the password on the first line" in r.stderr
    r = server_password("frobnicate", "--data", data)
    assert r.returncode == 2 and "unknown action 'frobnicate'" in r.stderr
    assert f.read_text() == text  # nothing of the failed attempts reached it
    assert server_password("clear", "--data", data).returncode == 0
    assert not f.exists()
    r = server_password("clear", "--data", data)
    assert r.returncode == 1 and "no server password" in r.stderr


def test_the_flag_needs_a_password_set(tmp_path):
    (tmp_path / "d").mkdir()
    r = subprocess.run([str(BIN / "yard-serve"), "--app", "chat", "--model", "epoll",
                        "--listen", "127.0.0.1:0", "--data", str(tmp_path / "d"),
                        "--server-password-required"], capture_output=True, text=True,
                       timeout=15)
    assert r.returncode == 1 and "yard-chat server-password set" in r.stderr, r.stderr


def register(port, *lines, nick="foo"):
    c = Irc(port)
    c.send(*lines, f"NICK {nick}", "USER u * * :Real")
    return c


@pytest.mark.models(extra=["fork-pair"])
def test_server_password(chat, model, accounts):
    set_password(accounts, "s3rver")  # the copy each model's server gets has it
    try:
        srv, data = chat(model, *FLAGS)
    finally:
        (accounts / "server-password").unlink()
    good = register(srv.port, "PASS s3rver")
    good.expect(r" 001 foo ")
    wrong = register(srv.port, "PASS s3rvergarbage", nick="bar")
    wrong.expect(r" 464 bar :Password incorrect$")
    wrong.expect(r"^ERROR :Closing Link: password incorrect$")
    assert wrong.wait_closed() and not [ln for ln in wrong.lines if " 001 " in ln]
    missing = register(srv.port, nick="baz")
    missing.expect(r" 464 baz :Password required: this server's password first \(PASS\)$")
    missing.expect(r"^ERROR :Closing Link: password required$")
    assert missing.wait_closed() and not [ln for ln in missing.lines if " 001 " in ln]
    # An account: the server's password and SASL.
    ana = Irc(srv.port)
    ana.send("CAP LS 302", "PASS s3rver", "NICK ana", "USER ana 0 * :ana", "CAP REQ :sasl",
             "AUTHENTICATE PLAIN")
    ana.expect(r"^AUTHENTICATE \+")
    ana.send("AUTHENTICATE " + base64.b64encode(b"\0ana\0pw-ana").decode())
    ana.expect(r" 903 ana ")
    ana.send("CAP END")
    ana.expect(r" 001 ana ")
    # PASS is not an account's password here.
    acct = register(srv.port, "PASS pw-ana", nick="ana")
    acct.expect(r" 464 ana :Password incorrect$")
    assert acct.wait_closed()
    # A new password, set while the server runs: the next registrations need it.
    set_password(data, "n3w")
    old = register(srv.port, "PASS s3rver", nick="qux")
    old.expect(r" 464 qux :Password incorrect$")
    new = register(srv.port, "PASS n3w", nick="qux")
    new.expect(r" 001 qux ")
    for c in (good, ana, new):
        c.close()


@pytest.mark.models()
def test_pass_is_an_accounts_without_the_flag(chat, model):
    srv, _ = chat(model, "--guests")
    ana = login_pass(srv.port, "ana", "pw-ana")
    ana.send("WHOIS ana")
    ana.expect(r" 330 ana ana ana ")
    ana.close()
