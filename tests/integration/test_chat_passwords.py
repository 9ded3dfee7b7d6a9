"""Long passwords (issue 40): `yard-chat account add` and `oper add` take 1-600 bytes
(601 refused, the bound named), the hash is the standard $2b$ one of the password's
first 72 bytes (libcrypt verifies it), and under every model a client logs in with
SASL PLAIN sent in 400-byte AUTHENTICATE pieces, as irctest's sasl.testPlainLarge*
do; a wrong password is 904."""

import base64
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture
from conftest import libcrypt

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture()
chat = chat_fixture()
LONGEST = 600


def tool(kind, *args, password):
    return subprocess.run([CHAT, kind, *map(str, args)], input=password, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("kind", ["account", "oper"])
def test_the_tools_take_600_bytes_and_refuse_601(tmp_path, kind):
    data = tmp_path / "d"
    r = tool(kind, "add", "big", "--data", data, "--cost", 4, password="p" * (LONGEST + 1) + "\n")
    assert r.returncode == 1 and "1-600 bytes" in r.stderr, r.stderr
    pw = "p" * 71 + "q" + "r" * (LONGEST - 72)
    r = tool(kind, "add", "big", "--data", data, "--cost", 4, password=pw + "\n")
    assert r.returncode == 0, r.stderr
    name = "accounts" if kind == "account" else "opers"
    line = (data / name).read_text().splitlines()[0]
    assert line.startswith("big:$2b$04$")
    stored = line.split(":", 1)[1].encode()
    lib = libcrypt()
    # The hash of the first 72 bytes, as any bcrypt makes it; byte 72 counts.
    assert lib.crypt(pw[:72].encode(), stored) == stored
    assert lib.crypt(("p" * 72).encode(), stored) != stored


def sasl_in_pieces(port, name, password):
    """A SASL PLAIN login whose payload goes in 400-byte pieces (and + after a
    last piece of exactly 400); returns the client and the payload's length."""
    c = Irc(port)
    c.send("CAP LS 302", f"NICK {name}", f"USER {name} 0 * :{name}")
    c.expect(r"CAP \S+ LS ")
    c.send("CAP REQ :sasl")
    c.expect(r"CAP \S+ ACK ")
    c.send("AUTHENTICATE PLAIN")
    c.expect(r"^AUTHENTICATE \+")
    payload = base64.b64encode(f"{name}\0{name}\0{password}".encode()).decode()
    pieces = [payload[i:i + 400] for i in range(0, len(payload), 400)]
    if len(pieces[-1]) == 400:
        pieces.append("+")
    c.send(*(f"AUTHENTICATE {p}" for p in pieces))
    return c, len(payload)


@pytest.mark.models(extra=["fork-pair"])
def test_sasl_with_long_passwords(chat, model):
    srv, data = chat(model)
    sizes = {"bar" * 100: 412, "bar" * 97: 400, "x" * 592: 800}
    for i, (pw, payload_len) in enumerate(sizes.items()):
        name = f"fo{i}"  # as long as irctest's "foo": the same payload sizes
        r = tool("account", "add", name, "--data", data, "--cost", 4, password=pw + "\n")
        assert r.returncode == 0, r.stderr
        c, n = sasl_in_pieces(srv.port, name, pw)
        assert n == payload_len
        c.expect(rf" 900 {name} {name}!{name}@yard {name} :You are now logged in as {name}$")
        c.expect(rf" 903 {name} :SASL authentication successful$")
        c.send("CAP END")
        c.expect(rf" 001 {name} ")
        c.close()
        bad, _ = sasl_in_pieces(srv.port, name, "Q" + pw[1:])
        bad.expect(rf" 904 {name} :SASL authentication failed", timeout=15)
        bad.close()
