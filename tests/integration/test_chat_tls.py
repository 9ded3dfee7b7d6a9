"""The chat over TLS (docs/tls.md, docs/chat.md), under every model: PASS and SASL
PLAIN logins over TLS, messages between a TLS client and a plain one, passwords
refused over plain text while a TLS listener exists (unless --plaintext-login
allow), and IRCv3 sts pointing plain clients to the TLS port."""

import base64
import json
import shutil
import signal
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_pass, login_sasl
from conftest import BIN
from tlslib import make_client_cert, tls_args

accounts = accounts_fixture("alice", "bob", *(f"u{i}" for i in range(6)))
chat = chat_fixture()


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
        # WHOIS tells who is encrypted (671): alice, to anybody; bob, to nobody.
        bob.send("WHOIS alice")
        bob.expect(r" 671 bob alice :is using a secure connection$")
        bob.expect(r" 318 bob alice ")
        alice.send("WHOIS bob")
        start = alice.pos
        alice.expect(r" 318 alice bob ")
        assert not any(" 671 " in line for line in alice.lines[start:alice.pos]), alice.lines
    finally:
        alice.close()
        bob.close()
    carol = login_pass(tls, "bob", "pw-bob", tls=pki)  # PASS over TLS too
    carol.close()


@pytest.mark.models(names=["fork", "epoll", "coro", "uring"])
def test_yard_load_chat_over_tls_counts_every_delivery(chat, pki, model):
    """yard-load chat --tls: 6 members log in over TLS, 120 messages at 120/s; every
    other member gets each one, and each connection made one full handshake. A
    plain port is a clear error, not a hang."""
    srv, _ = chat(model, *tls_args(pki))
    plain, tls = ports(srv)
    r = subprocess.run([BIN / "yard-load", "chat", "--target", f"tls:127.0.0.1:{tls}",
                        "--tls-ca", pki.ca, "--connections", "6", "--rate", "120",
                        "--duration", "1s", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["messages_sent"] == 120 and d["deliveries"] == 5 * 120 and d["errors"] == 0
    t = d["tls"]
    assert (t["full_handshakes"], t["resumed_handshakes"], t["failures"]) == (6, 0, 0)
    r = subprocess.run([BIN / "yard-load", "chat", "--target", f"127.0.0.1:{plain}", "--tls",
                        "--tls-insecure", "--connections", "2", "--rate", "10", "--duration",
                        "1s", "--timeout", "10s"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "TLS" in r.stderr, r.stderr


@pytest.mark.models()
def test_a_stopping_server_says_goodbye_over_tls(chat, pki, model):
    """SIGTERM: a client logged in over TLS reads the farewell, sealed like any line,
    then the end of the session, under every model (the blocking ones shut a TLS
    socket's read side first, so that its own thread can seal it); exit 0."""
    srv, _ = chat(model, *tls_args(pki))
    _, tls = ports(srv)
    alice = login_pass(tls, "alice", "pw-alice", tls=pki)
    alice.send("JOIN #bye")
    alice.expect(r" 366 ")
    srv.proc.send_signal(signal.SIGTERM)
    alice.expect(r"^ERROR :Server shutting down$")
    assert alice.wait_closed()
    assert srv.stop(timeout=5) == 0, srv.stderr()


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


def certfp(data, *args):
    return subprocess.run([CHAT, "account", "certfp", *map(str, args), "--data", str(data)],
                          capture_output=True, text=True, timeout=30)


def external(port, pki, cert, authzid="+"):
    """CAP, then AUTHENTICATE EXTERNAL over TLS with cert; the client, and
    the line that ended the exchange (900..., or 904)."""
    c = Irc(port, tls=pki, cert=cert)
    c.send("CAP LS 302", "NICK someone", "USER someone 0 * :someone")
    caps = c.expect(r"CAP \* LS :(.*)$").group(1).split()
    assert "sasl=PLAIN,EXTERNAL" in caps, caps
    c.send("CAP REQ :sasl", "AUTHENTICATE EXTERNAL")
    c.expect(r"^AUTHENTICATE \+")
    c.send(f"AUTHENTICATE {authzid}")
    return c, c.expect(r" (90[03]|904) ")


@pytest.mark.models()
def test_sasl_external_logs_in_with_a_listed_certificate(chat, pki, model, tmp_path):
    srv, data = chat(model, *tls_args(pki))
    tls = srv.tls_addrs[0][1]
    cert, key, fp = make_client_cert(tmp_path / "alice", "alice")
    assert certfp(data, "add", "alice", fp).returncode == 0
    listed = certfp(data, "list", "alice")
    assert listed.stdout.split() == [fp.replace(":", "").lower()], listed
    c, m = external(tls, pki, (cert, key))
    assert m.group(1) == "900", c.lines
    c.expect(r" 903 ")
    c.send("CAP END")
    c.expect(r" 001 someone ")                      # SASL keeps the nick (issue 40)
    c.send("WHOIS alice")                            # the account's name finds its nick
    c.expect(r" 671 someone someone :is using a secure connection")
    c.expect(r" 276 someone someone :has client certificate fingerprint " +
             fp.replace(":", "").lower())
    c.close()
    # Naming the account it belongs to is the same; naming another is refused.
    c, m = external(tls, pki, (cert, key), base64.b64encode(b"alice").decode())
    assert m.group(1) == "900", c.lines
    c.close()
    c, m = external(tls, pki, (cert, key), base64.b64encode(b"bob").decode())
    assert m.group(1) == "904", c.lines
    c.close()
    # A certificate nobody listed, and no certificate at all.
    other = make_client_cert(tmp_path / "mallory", "mallory")
    c, m = external(tls, pki, other[:2])
    assert m.group(1) == "904", c.lines
    c.close()
    c = Irc(tls, tls=pki)
    c.send("CAP LS 302", "NICK x", "USER x 0 * :x", "CAP REQ :sasl", "AUTHENTICATE EXTERNAL",
           "AUTHENTICATE +")
    c.expect(r" 904 \S+ :SASL authentication failed: no client certificate was presented")
    c.close()
    # Removed from the list: it logs nobody in any more.
    assert certfp(data, "del", "alice", fp).returncode == 0
    c, m = external(tls, pki, (cert, key))
    assert m.group(1) == "904", c.lines
    c.close()


def test_sasl_external_needs_tls(chat, pki):
    srv, _ = chat("epoll", *tls_args(pki))
    c = Irc(srv.port)
    c.send("CAP LS 302")
    assert "sasl=PLAIN" in c.expect(r"CAP \* LS :(.*)$").group(1).split()
    c.send("NICK x", "USER x 0 * :x", "CAP REQ :sasl", "AUTHENTICATE EXTERNAL")
    c.expect(r" 908 \S+ PLAIN :are available SASL mechanisms")
    c.expect(r" 904 \S+ :SASL authentication failed: EXTERNAL needs a TLS connection")
    c.close()


def test_certfp_command_errors(accounts, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(accounts, data)
    fp = "AB:" * 31 + "AB"
    assert certfp(data, "add", "alice", fp).returncode == 0
    r = certfp(data, "add", "bob", fp)  # one certificate, one account
    assert r.returncode == 1 and "listed for 'alice' already" in r.stderr, r.stderr
    r = certfp(data, "add", "nobody", "cd" * 32)
    assert r.returncode == 1 and "no account 'nobody'" in r.stderr, r.stderr
    r = certfp(data, "add", "alice", "xyz")
    assert r.returncode == 2 and "not a SHA-256 fingerprint" in r.stderr, r.stderr
    r = certfp(data, "del", "bob", fp)
    assert r.returncode == 1 and "not listed for 'bob'" in r.stderr, r.stderr
    r = certfp(data, "list")
    assert r.returncode == 2, r.stderr
    assert (data / "certfps").stat().st_mode & 0o777 == 0o600
