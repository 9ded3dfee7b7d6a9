"""Text in our chat tools: UTF-8 drawn as characters (accents, CJK, an emoji
ZWJ sequence, a combining accent) in the ncurses UI, in tmux, on two
screens, with the input line editing clusters; control characters from any
server escaped in both UIs, never raw; the ASCII fallback without a UTF-8
locale; `yard-chat log dump` writing UTF-8 as UTF-8 and bytes that are not
in text_b64, so a JSON reader gets the exact bytes back.

What the server relays is its business (it may strip control characters):
the escaping tests use a fake server on loopback that sends whatever bytes
a test gives it, and the tests through our server compare the client's
output with what a raw member received."""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from chatlib import CHAT, LineReader, add_accounts, login_pass
from conftest import BIN, SANITIZER_MARKERS, wait_for

pytestmark = pytest.mark.skipif(not CHAT.exists(), reason="yard-chat is not built")
need_tmux = pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed")

WOMAN_TECH = "\U0001F469\u200d\U0001F4BB"   # 👩‍💻: woman, ZWJ, laptop
E_ACUTE = "e\u0301"                          # e + COMBINING ACUTE ACCENT


def shown(raw: bytes) -> str:
    """What the client draws for raw: U+FFFD per maximal invalid subpart
    (Python's "replace" does the same), controls in caret notation (C1 as
    cat -v: M-^[ for U+009B)."""
    out = []
    for ch in raw.decode("utf-8", "replace"):
        c = ord(ch)
        if c < 0x20:
            out.append("^" + chr(c + 0x40))
        elif c == 0x7F:
            out.append("^?")
        elif 0x80 <= c < 0xA0:
            out.append("M-^" + chr(c - 0x40))
        else:
            out.append(ch)
    return "".join(out)


def assert_terminal_safe(text: str):
    """No C0 but newline, no DEL, no C1 anywhere in what reached the terminal."""
    bad = [f"U+{ord(c):04X}" for c in text if (ord(c) < 0x20 and c != "\n") or
           0x7F <= ord(c) < 0xA0]
    assert not bad, f"raw control characters reached the terminal: {bad}"


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    add_accounts(d, ("alice", "bob", "carol"))
    return d


def serve(start_server, data):
    return start_server([BIN / "yard-serve", "--app", "chat", "--model", "epoll", "--listen",
                         "127.0.0.1:0", "--data", data])


class RawMember:
    """A raw IRC member of a channel that keeps the bytes of what it gets."""

    def __init__(self, port, name, chan):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.lines: list[bytes] = []
        self.sock.sendall(f"PASS pw-{name}\r\nNICK {name}\r\nUSER {name} 0 * :{name}\r\n"
                          f"JOIN {chan}\r\n".encode())
        self.expect(rb" 366 ")

    def expect(self, rx: bytes, timeout=10.0) -> re.Match:
        pattern = re.compile(rx)
        deadline = time.monotonic() + timeout
        while True:
            while self.lines:
                m = pattern.search(self.lines.pop(0))
                if m:
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {rx!r} within {timeout}s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                raise AssertionError(f"closed while waiting for {rx!r}")
            self.buf += data
            *done, self.buf = self.buf.split(b"\r\n")
            self.lines += done

    def privmsg(self, sender: str, timeout=10.0) -> bytes:
        """The text of the next PRIVMSG from sender, as bytes."""
        return self.expect(rb"^:" + sender.encode() + rb"!\S+ PRIVMSG \S+ :(.*)$",
                           timeout).group(1)

    def close(self):
        self.sock.close()


class FakeIrc:
    """A fake IRC server on loopback: logs one client in (SASL, 903, 001),
    answers its JOIN, then sends the given lines byte for byte, as a broken
    or hostile server could. Closes on QUIT."""

    def __init__(self, user: bytes, lines: list[bytes]):
        self.user, self.lines = user, lines
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _reply(self, line: bytes) -> bytes:
        if line.startswith(b"CAP REQ"):
            return b":fake CAP * ACK :sasl server-time echo-message\r\n"
        if line == b"AUTHENTICATE PLAIN":
            return b"AUTHENTICATE +\r\n"
        if line.startswith(b"AUTHENTICATE "):
            return b":fake 903 " + self.user + b" :SASL authentication successful\r\n"
        if line == b"CAP END":
            return b":fake 001 " + self.user + b" :Welcome\r\n"
        if line.startswith(b"JOIN "):
            u = self.user
            return (b":" + u + b"!" + u + b"@fake JOIN " + line[5:] + b"\r\n" +
                    b"".join(x + b"\r\n" for x in self.lines))
        return b""

    def _serve(self):
        self.lsock.settimeout(30)
        try:
            conn, _ = self.lsock.accept()
        except OSError:
            return
        conn.settimeout(30)
        buf = b""
        try:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                *done, buf = buf.split(b"\n")
                for line in done:
                    line = line.rstrip(b"\r")
                    self.received.append(line)
                    if line.startswith(b"QUIT"):
                        return
                    out = self._reply(line)
                    if out:
                        conn.sendall(out)
        except OSError:
            return
        finally:
            conn.close()

    def close(self):
        self.lsock.close()
        self.thread.join(5)


class PlainBytes:
    """yard-chat connect --plain with its stdout kept as bytes."""

    def __init__(self, port, user, *args, env=None):
        e = dict(os.environ, YARD_PASSWORD=f"pw-{user}", **(env or {}))
        self.p = subprocess.Popen([CHAT, "connect", f"127.0.0.1:{port}", "--user", user,
                                   "--plain", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.lines = LineReader(self.p.stdout)

    @property
    def out(self) -> bytes:
        """Everything the client printed so far (what was read of it)."""
        return b"".join(self.lines.read)

    def expect(self, needle: bytes, timeout=10.0) -> bytes:
        return self.lines.expect(needle, timeout)

    def finish(self, timeout=10) -> tuple[int, bytes]:
        """Close stdin (the client says QUIT), wait; the exit code and stderr."""
        self.p.stdin.close()
        rc = self.p.wait(timeout)
        self.lines.rest(timeout)
        return rc, self.p.stderr.read()


# ---- log dump --------------------------------------------------------------

def test_dump_round_trips_text_and_bytes(start_server, data):
    srv = serve(start_server, data)
    carol = RawMember(srv.port, "carol", "#t")
    alice = login_pass(srv.port, "alice", "pw-alice")
    alice.send("JOIN #t")
    alice.expect(r" 366 ")
    sent = [
        "ünïcödé café Ωμέγα".encode(),
        "中文字 日本語 한국어".encode(),
        f"{WOMAN_TECH} ✓ ❤\ufe0f {E_ACUTE} 🇫🇷".encode(),
        'quote " back \\ slash'.encode(),
        b"bad \xff\xfe here",
        b"cut \xe2\x82 and \xed\xa0\x80 surrogate",
        b"valid \xc3\xa9 then half \xc3",
    ]
    relayed = []
    for text in sent:
        alice.sock.sendall(b"PRIVMSG #t :" + text + b"\r\n")
        relayed.append(carol.privmsg("alice"))
    # The server relays (and logs) bytes that are not UTF-8 as they are; what
    # it logged is what it relayed.
    assert relayed[4] == sent[4] and relayed[6] == sent[6]
    r = subprocess.run([CHAT, "log", "dump", "--data", data], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode("utf-8")        # strict: the dump is valid UTF-8
    assert "中文字 日本語" in out and WOMAN_TECH in out    # as characters, not \u escapes
    recs = [json.loads(line) for line in out.splitlines()]
    recs = [x for x in recs if x["target"] == "#t" and x["type"] == "message"]
    assert len(recs) == len(sent)
    invalid = 0
    for rec, raw in zip(recs, relayed):
        assert rec["sender"] == "alice" and rec["type"] == "message"
        assert "sender_b64" not in rec and "target_b64" not in rec
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            invalid += 1
            assert base64.b64decode(rec["text_b64"], validate=True) == raw
            assert rec["text"] == raw.decode("utf-8", "replace")
        else:
            assert rec["text"] == text and "text_b64" not in rec
            assert rec["text"].encode("utf-8") == raw
    assert invalid == 3
    assert b"3 records with bytes that are not UTF-8" in r.stderr
    carol.close()


# ---- control characters from a server ------------------------------------

HOSTILE = [
    b":mallory!m@fake PRIVMSG #x :red \x1b[31mRED\x1b[0m title \x1b]0;pwned\x07 bell",
    b":mallory!m@fake PRIVMSG #x :c1 \xc2\x9b" b"31m nel\xc2\x85 del\x7f raw\x9b bad\xff\xfe end",
    b":ev\x1b[7mil!e@fake NOTICE #x :\x1b[2J\x1b[Hcleared? \x01\x1f",
    b":mallory!m@fake PRIVMSG #x :cr\rhere",
    b":fake 332 alice #x :topic \x1b]52;c;AAAA\x07 \x08\x08 tail",
]
# A bare CR: our IRC framer (shared with the server) may end the line there
# (RFC 1459 lets CR alone end one); if it keeps it, it is drawn as ^M.
CR_SHOWN = ("<mallory> cr^Mhere", "<mallory> cr")
HOSTILE_SHOWN = [
    "[#x] <mallory> " + shown(b"red \x1b[31mRED\x1b[0m title \x1b]0;pwned\x07 bell"),
    "[#x] <mallory> " + shown(b"c1 \xc2\x9b31m nel\xc2\x85 del\x7f raw\x9b bad\xff\xfe end"),
    "[#x] -" + shown(b"ev\x1b[7mil") + "- " + shown(b"\x1b[2J\x1b[Hcleared? \x01\x1f"),
    "* topic of #x: " + shown(b"topic \x1b]52;c;AAAA\x07 \x08\x08 tail"),
]


def test_oracle_spells_what_the_client_draws():
    # The expected forms, spelled out once, so a wrong oracle cannot pass.
    assert HOSTILE_SHOWN[0] == "[#x] <mallory> red ^[[31mRED^[[0m title ^[]0;pwned^G bell"
    assert HOSTILE_SHOWN[1] == ("[#x] <mallory> c1 M-^[31m nelM-^E del^? raw\ufffd "
                                "bad\ufffd\ufffd end")
    assert HOSTILE_SHOWN[2] == "[#x] -ev^[[7mil- ^[[2J^[[Hcleared? ^A^_"
    assert shown(b"\x00") == "^@"


def test_plain_client_escapes_controls_from_any_server():
    fake = FakeIrc(b"alice", HOSTILE)
    c = PlainBytes(fake.port, "alice", "--join", "#x")
    try:
        c.expect(b"* joined #x")
        for want in HOSTILE_SHOWN:
            line = c.expect(want.encode())
            assert line.decode().rstrip("\n").endswith(want)
        assert c.expect(b"<mallory> cr").decode().rstrip("\n").endswith(CR_SHOWN)
        rc, err = c.finish()
    finally:
        if c.p.poll() is None:
            c.p.kill()
        fake.close()
    assert rc == 0, err
    out = c.out.decode("utf-8")           # strict: valid UTF-8 only
    assert_terminal_safe(out)
    assert "pwned" in out and "\x1b" not in out


def test_plain_client_through_our_server(start_server, data):
    """Whatever our server relays (it may strip some of it), the client
    shows exactly that, escaped."""
    srv = serve(start_server, data)
    carol = RawMember(srv.port, "carol", "#room")
    bob = PlainBytes(srv.port, "bob", "--join", "#room")
    bob.expect(b"* joined #room")
    alice = login_pass(srv.port, "alice", "pw-alice")
    alice.send("JOIN #room")
    alice.expect(r" 366 ")
    texts = [b"red \x1b[31mRED\x1b[0m title \x1b]0;pwned\x07 bell",
             b"cr\rinside", b"c1 \xc2\x9b" b"31m nel\xc2\x85 del\x7f raw\x9b bad\xff end",
             b"\x01ACTION-ish\x01 soh", "ünïcödé 中文 ".encode() + WOMAN_TECH.encode()]
    for text in texts:
        alice.sock.sendall(b"PRIVMSG #room :" + text + b"\r\n")
        relayed = carol.privmsg("alice")
        line = bob.expect(b"<alice> ").decode("utf-8").rstrip("\n")
        assert line.endswith("[#room] <alice> " + shown(relayed)), (line, relayed)
    rc, err = bob.finish()
    assert rc == 0, err
    assert_terminal_safe(bob.out.decode("utf-8"))
    carol.close()


def test_long_line_is_sent_in_pieces_cut_between_characters(start_server, data):
    """A line longer than one IRC message goes out as several, none of them
    starting or ending inside a character or a cluster (a letter and its
    accent, an emoji ZWJ sequence)."""
    srv = serve(start_server, data)
    carol = RawMember(srv.port, "carol", "#room")
    bob = PlainBytes(srv.port, "bob", "--join", "#room")
    bob.expect(b"* joined #room")
    unit = "中文" + E_ACUTE + WOMAN_TECH       # 6 + 3 + 11 bytes
    text = unit * 60                            # 1200 bytes: three messages or more
    bob.p.stdin.write(text.encode() + b"\n")
    bob.p.stdin.flush()
    pieces, got = [], 0
    while got < len(text.encode()):
        piece = carol.privmsg("bob")
        assert len(b":bob!bob@yard PRIVMSG #room :" + piece + b"\r\n") <= 512
        pieces.append(piece.decode("utf-8"))   # strict: no split code point
        got += len(piece)
    assert len(pieces) >= 3 and "".join(pieces) == text
    for piece in pieces:
        assert not piece.startswith(("\u0301", "\u200d", "\U0001F4BB")), piece[:3]
        assert not piece.endswith(("\u200d", "e", "\U0001F469")), piece[-3:]
    rc, err = bob.finish()
    assert rc == 0, err
    carol.close()


# ---- the ncurses UI in tmux ------------------------------------------------

class Tmux:
    """A tmux server of our own (-L) with fixed 80x24 windows, one session per
    client; each client's stderr goes to a file (sanitizer reports)."""

    def __init__(self, tmp_path):
        self.sock = f"yard-text-{os.getpid()}-{time.monotonic_ns()}"
        self.tmp = tmp_path
        conf = tmp_path / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\nset -g default-terminal screen\n"
                        "set -g status off\n")
        self.conf = conf
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        self.env["LANG"] = "C.UTF-8"
        self.env.pop("LC_ALL", None)
        self.sessions: list[str] = []

    def run(self, *args) -> str:
        r = subprocess.run(["tmux", "-u", "-L", self.sock, "-f", str(self.conf), *args],
                           capture_output=True, env=self.env, timeout=10)
        assert r.returncode == 0, (args, r.stderr)
        return r.stdout.decode("utf-8")

    def start(self, name, port, user, *args, env="LANG=C.UTF-8"):
        err, status = self.tmp / f"{name}.stderr", self.tmp / f"{name}.status"
        # The shell writes the exit status: tmux 3.3 sometimes leaves a pane's
        # process unreaped, and #{pane_dead_status} empty, for seconds.
        cmd = (f"env -u LC_ALL -u LC_CTYPE {env} YARD_PASSWORD=pw-{user} {CHAT} connect "
               f"127.0.0.1:{port} --user {user} {' '.join(args)} 2>{err}; echo $? >{status}")
        self.run("new-session", "-d", "-s", name, "-x", "80", "-y", "24", cmd)
        self.sessions.append(name)

    def screen(self, name) -> list[str]:
        return [line.rstrip() for line in self.run("capture-pane", "-p", "-t", name)
                .split("\n")[:24]]

    def wait_screen(self, name, cond, what, timeout=10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen(name)
            if cond(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}: timed out waiting for {what}; screen:\n" +
                                     "\n".join(s))
            time.sleep(0.02)

    def wait_line(self, name, rx, timeout=10.0) -> list[str]:
        pattern = re.compile(rx)
        return self.wait_screen(name, lambda s: any(pattern.fullmatch(x) for x in s),
                                f"a line matching {rx!r}", timeout)

    def keys(self, name, *keys):
        self.run("send-keys", "-t", name, *keys)

    def type(self, name, text):
        self.run("send-keys", "-t", name, "-l", text)

    def display(self, name, fmt) -> str:
        return self.run("display-message", "-p", "-t", name, fmt).strip()

    def quit(self, name):
        """/quit, and the client's exit status (0 expected)."""
        self.type(name, "/quit")
        self.keys(name, "Enter")
        path = self.tmp / f"{name}.status"
        status = wait_for(lambda: path.exists() and path.read_text().strip(),
                          what=f"{name} to exit")
        err = (self.tmp / f"{name}.stderr").read_text(errors="replace")
        assert not [m for m in SANITIZER_MARKERS if m in err], err
        return int(status)

    def kill(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True,
                       env=self.env, timeout=10)


@pytest.fixture
def tmux(tmp_path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


def line_rx(chan, nick, text):
    return r"\d\d:\d\d \[" + re.escape(chan) + r"\] <" + nick + "> " + re.escape(text)


@need_tmux
def test_tmux_two_clients_utf8_and_editing(start_server, data, tmux):
    srv = serve(start_server, data)
    carol = RawMember(srv.port, "carol", "#room")
    status = f" 127.0.0.1:{srv.port} | connected | #room"
    for who in ("alice", "bob"):
        tmux.start(who, srv.port, who, "--join", "'#room'")
    for who in ("alice", "bob"):
        tmux.wait_screen(who, lambda s: "* joined #room" in s and s[22] == status,
                         "joined, and the status line")

    says = [("alice", "ünïcödé ✓ Ωμέγα ça"),
            ("bob", "中文字 日本語 한국어"),
            ("alice", f"{WOMAN_TECH} ok {E_ACUTE} caf{E_ACUTE}")]
    for who, text in says:
        tmux.type(who, text)
        tmux.keys(who, "Enter")
        assert carol.privmsg(who) == text.encode()      # what the server got
    for screen in ("alice", "bob"):
        for who, text in says:
            tmux.wait_line(screen, line_rx("#room", who, text))

    # A long line of wide characters wraps by width: 20 columns of prefix,
    # "x", 29 CJK characters (79 columns); the 30th does not fit the last
    # column and starts the next row.
    tmux.type("bob", "x" + "中" * 45 + "END")
    tmux.keys("bob", "Enter")
    carol.privmsg("bob")
    for screen in ("alice", "bob"):
        s = tmux.wait_line(screen, "中" * 16 + "END")
        i = s.index("中" * 16 + "END")
        assert re.fullmatch(line_rx("#room", "bob", "x" + "中" * 29), s[i - 1]), s[i - 1]
        assert s[22] == status, s[22]      # the status line stays where it is
        assert s[23] == ""                 # and the input line is empty

    # Editing goes by characters: type, move left over the emoji sequence
    # (one step) and back over the wide 中, delete the accented é (two code
    # points, one step), insert.
    tmux.type("alice", f"ab中{E_ACUTE}{WOMAN_TECH}z")
    tmux.wait_screen("alice", lambda s: s[23] == f"ab中{E_ACUTE}{WOMAN_TECH}z", "the input")
    # a, b, 中 (2 columns), é (1), the emoji (2), z: the cursor is at column 8.
    assert tmux.display("alice", "#{cursor_x} #{cursor_y}") == "8 23"
    tmux.keys("alice", "Left", "Left", "BSpace", "Left", "DC", "Right")
    tmux.type("alice", "Ω")
    want = f"ab{WOMAN_TECH}Ωz"
    tmux.wait_screen("alice", lambda s: s[23] == want, "the edited input")
    wait_for(lambda: tmux.display("alice", "#{cursor_x} #{cursor_y}") == "5 23",
             what="the cursor after Ω (a, b, the 2-column emoji, Ω)")
    tmux.keys("alice", "Enter")
    assert carol.privmsg("alice") == want.encode()
    for screen in ("alice", "bob"):
        tmux.wait_line(screen, line_rx("#room", "alice", want))

    assert tmux.quit("alice") == 0
    assert tmux.quit("bob") == 0
    carol.close()


@need_tmux
def test_tmux_client_escapes_controls_from_any_server(tmux):
    fake = FakeIrc(b"alice", HOSTILE)
    try:
        tmux.start("alice", fake.port, "alice", "--join", "'#x'")
        s = tmux.wait_screen("alice", lambda s: any(x.endswith(HOSTILE_SHOWN[-1]) for x in s),
                             "the last hostile line")
        for want in HOSTILE_SHOWN:
            assert any(x.endswith(want) for x in s), (want, s)
        assert any(x.endswith(CR_SHOWN) for x in s), s
        for x in s:
            assert_terminal_safe(x)
        assert s[22] == f" 127.0.0.1:{fake.port} | connected | #x"
        # The escapes are drawn in reverse video; no colour, title or clear
        # screen from the server took effect.
        attrs = tmux.run("capture-pane", "-p", "-e", "-t", "alice")
        assert "\x1b[7m^[" in attrs
        assert "pwned" not in tmux.display("alice", "#{pane_title}")
        assert "* joined #x" in s        # not cleared by ESC [2J
        assert tmux.quit("alice") == 0
    finally:
        fake.close()


@need_tmux
def test_tmux_without_utf8_locale_falls_back_to_ascii(tmux):
    fake = FakeIrc(b"alice", [
        b":bob!b@fake PRIVMSG #x :caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 " + WOMAN_TECH.encode() +
        b" e\xcc\x81 \xff \x1b[1m ok",
    ])
    try:
        tmux.start("alice", fake.port, "alice", "--join", "'#x'", env="LC_ALL=C LANG=C")
        s = tmux.wait_line("alice", r".*<bob> caf\? \?\? \? \? \? \^\[\[1m ok")
        notes = [x for x in s if "is not UTF-8" in x]
        assert len(notes) == 1, s          # said once
        for x in s:
            assert x.isascii(), x
        assert tmux.quit("alice") == 0
    finally:
        fake.close()
