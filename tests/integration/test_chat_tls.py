"""The chat over TLS (docs/tls.md, docs/chat.md), under every model: PASS and SASL
PLAIN logins over TLS, messages between a TLS client and a plain one, passwords
refused over plain text while a TLS listener exists (unless --plaintext-login
allow), and IRCv3 sts pointing plain clients to the TLS port."""

import base64
import subprocess

import pytest

from chatlib import Irc, accounts_fixture, chat_fixture, login_pass, login_sasl
from conftest import BIN
from tlslib import make_pki, tls_args

accounts = accounts_fixture("alice", "bob")
chat = chat_fixture()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def ports(srv):
    return srv.addrs[0][1], srv.tls_addrs[0][1]


@pytest.mark.models()
def test_logins_over_tls_and_a_message_to_a_plain_client(chat, pki, model):
    srv, _ = chat(model, *tls_args(pki), "--plaintext-login", "allow")
    plain, tls = ports(srv)
    alice = login_sasl(tls, "alice", "pw-alice", tls=pki)
    bob = login_pass(plain, "bob", "pw-bob")
    try:
        for c in (alice, bob):
            c.send("JOIN #sec")
            c.expect(r" 366 ")
        alice.send("PRIVMSG #sec :сообщение через TLS 🔒")
        bob.expect(r"^:alice!\S+ PRIVMSG #sec :сообщение через TLS 🔒$")
        bob.send("PRIVMSG #sec :and back in plain text")
        alice.expect(r"^:bob!\S+ PRIVMSG #sec :and back in plain text$")
    finally:
        alice.close()
        bob.close()
    carol = login_pass(tls, "bob", "pw-bob", tls=pki)  # PASS over TLS too
    carol.close()


@pytest.mark.models()
def test_passwords_over_plain_text_are_refused_beside_tls(chat, pki, model):
    srv, _ = chat(model, *tls_args(pki))
    plain, tls = ports(srv)
    c = Irc(plain)
    c.send("PASS pw-alice", "NICK alice", "USER alice 0 * :alice")
    m = c.expect(r"^ERROR :Closing Link: log in over TLS, on port (\d+)")
    assert int(m.group(1)) == tls
    assert c.wait_closed()
    c = Irc(plain)
    c.send("CAP LS 302", "NICK bob", "USER bob 0 * :bob", "CAP REQ :sasl", "AUTHENTICATE PLAIN")
    c.expect(r"^AUTHENTICATE \+")
    c.send("AUTHENTICATE " + base64.b64encode(b"\0bob\0pw-bob").decode())
    m = c.expect(r" 904 \S+ :SASL authentication failed: log in over TLS, on port (\d+)")
    assert int(m.group(1)) == tls
    c.close()
    # Over TLS the same logins are taken.
    login_sasl(tls, "bob", "pw-bob", tls=pki).close()


@pytest.mark.models(names=["epoll", "fork"])
def test_sts_points_plain_clients_to_tls(chat, pki, model):
    srv, _ = chat(model, *tls_args(pki), "--sts-duration", "30d")
    plain, tls = ports(srv)
    c = Irc(plain)
    c.send("CAP LS 302")
    caps = c.expect(r"CAP \* LS :(.*)$").group(1).split()
    assert f"sts=port={tls}" in caps, caps
    c.send("CAP REQ :sts")
    c.expect(r"CAP \* NAK :sts")  # a value to read, never a capability to ask for
    c.close()
    c = Irc(tls, tls=pki)
    c.send("CAP LS 302")
    caps = c.expect(r"CAP \* LS :(.*)$").group(1).split()
    assert f"sts=duration={30 * 86400}" in caps, caps
    c.send("CAP LS")  # without 302, no values: no sts
    assert not any(x.startswith("sts") for x in c.expect(r"CAP \* LS :(.*)$").group(1).split())
    c.close()


def test_sts_without_a_tls_listener_is_refused(tmp_path):
    r = subprocess.run([str(BIN / "yard-serve"), "--app", "chat", "--model", "epoll",
                        "--listen", "127.0.0.1:0", "--data", str(tmp_path / "d"),
                        "--sts-duration", "30d"], capture_output=True, text=True, timeout=15)
    assert r.returncode == 1 and "--sts-duration points clients to TLS: add --tls-listen" in \
        r.stderr, r.stderr
