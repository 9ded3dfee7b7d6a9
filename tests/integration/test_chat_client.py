"""Clients of the chat service: yard-chat connect (--plain and its ncurses UI
in a pseudo-terminal), reconnection with catch-up, and a real IRC client,
ii (Debian's package), logging in, joining, sending and receiving."""

import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import time

import pytest

from chatlib import CHAT, LineReader, add_accounts, login_pass, login_sasl
from conftest import BIN, wait_for
from tlslib import make_pki, tls_args

pytestmark = pytest.mark.usefixtures("yard_chat_built")


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    add_accounts(d, ("alice", "bob", "carol"))
    return d


def serve(start_server, data, port=0):
    return start_server([BIN / "yard-serve", "--app", "chat", "--model", "epoll", "--listen",
                         f"127.0.0.1:{port}", "--data", data, "--server-name", "yard"])


class Plain:
    """yard-chat connect --plain with its stdout read by a thread."""

    def __init__(self, port, user, *args, env_password=True):
        env = dict(os.environ)
        if env_password:
            env["YARD_PASSWORD"] = f"pw-{user}"
        self.p = subprocess.Popen([CHAT, "connect", f"127.0.0.1:{port}", "--user", user, "--plain",
                                   *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        self.out = LineReader(self.p.stdout, strip="\n")

    def expect(self, needle, timeout=10.0):
        return self.out.expect(needle, timeout)

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def finish(self, timeout=10):
        self.p.stdin.close()
        return self.p.wait(timeout)


def test_plain_clients_talk(start_server, data):
    srv = serve(start_server, data)
    a = Plain(srv.port, "alice", "--join", "#room")
    a.expect("* joined #room")
    b = Plain(srv.port, "bob", "--join", "#room")
    b.expect("* joined #room")
    a.expect("[#room] * bob joined")
    b.say("hello alice")
    b.say("/me waves")
    b.say("/msg alice just you")
    a.expect("[#room] <bob> hello alice")
    a.expect("[#room] * bob waves")
    a.expect("[alice] <bob> just you")
    a.say("/topic plans 🌱 план")   # alice made #room: its operator, who may (+t)
    b.expect("[#room] * alice set the topic: plans 🌱 план")
    c = Plain(srv.port, "carol", "--join", "#room")
    c.expect("* joined #room")
    b.expect("[#room] * carol joined")
    c.say("/quit off to bed")
    assert c.p.wait(10) == 0
    b.expect("* carol quit (Quit: off to bed)")
    a.say("/part")
    a.expect("* left #room")
    b.expect("[#room] * alice left")
    a.say("/quit")
    assert a.p.wait(10) == 0
    assert b.finish() == 0


def test_password_sources(start_server, data, tmp_path):
    srv = serve(start_server, data)
    pw = tmp_path / "pw"
    pw.write_text("pw-carol\n")
    pw.chmod(0o644)
    r = subprocess.run([CHAT, "connect", f"127.0.0.1:{srv.port}", "--user", "carol", "--plain",
                        "--password-file", pw], capture_output=True, text=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "readable by others" in r.stderr
    pw.chmod(0o600)
    c = Plain(srv.port, "carol", "--password-file", str(pw), "--join", "#x", env_password=False)
    c.expect("* joined #x")
    assert c.finish() == 0
    # No password anywhere and no terminal: a clear refusal.
    r = subprocess.run([CHAT, "connect", f"127.0.0.1:{srv.port}", "--user", "carol", "--plain"],
                       capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL,
                       env={k: v for k, v in os.environ.items() if k != "YARD_PASSWORD"},
                       start_new_session=True)
    assert r.returncode == 1 and "no password" in r.stderr
    # A wrong password is reported.
    env = dict(os.environ, YARD_PASSWORD="nope")
    p = subprocess.Popen([CHAT, "connect", f"127.0.0.1:{srv.port}", "--user", "carol",
                          "--plain"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    line = ""
    deadline = time.monotonic() + 15
    while "login failed" not in line and time.monotonic() < deadline:
        line = p.stdout.readline()
    p.kill()
    p.wait()
    assert "login failed" in line


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_reconnect_and_catch_up(start_server, data):
    port = free_port()
    srv = serve(start_server, data, port)
    a = Plain(srv.port, "alice", "--join", "#room")
    a.expect("* joined #room")
    srv.close()   # the server goes away
    a.expect("* disconnected; trying again")
    srv2 = serve(start_server, data, port)
    b = login_pass(srv2.port, "bob", "pw-bob")
    b.send("JOIN #room", "PRIVMSG #room :while you were away")
    b.expect(r" 366 ")
    # The client comes back by itself, joins again, and the server replays.
    a.expect("* connected to", timeout=40)
    a.expect("<bob> while you were away", timeout=10)
    assert a.finish() == 0


def test_terminal_ui_in_a_pty(start_server, data):
    srv = serve(start_server, data)
    b = Plain(srv.port, "bob", "--join", "#room")
    b.expect("* joined #room")
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.environ["YARD_PASSWORD"] = "pw-alice"
        os.environ["LINES"], os.environ["COLUMNS"] = "24", "80"
        os.execv(str(CHAT), [str(CHAT), "connect", f"127.0.0.1:{srv.port}", "--user", "alice",
                             "--join", "#room"])
    screen = b""

    def read_until(needle, timeout=10):
        nonlocal screen
        deadline = time.monotonic() + timeout
        while needle not in screen and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    screen += os.read(fd, 65536)
                except OSError:
                    break
        assert needle in screen, screen[-500:]

    try:
        read_until(b"joined #room")
        read_until(b"connected")        # the status line
        os.write(fd, b"hi from the ui\r")
        b.expect("[#room] <alice> hi from the ui")
        b.say("back to you")
        read_until(b"back to you")
        os.write(fd, b"/quit\r")
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    assert b.finish() == 0


def read_if_there(path) -> str:
    """A file ii writes, or "" while ii has not created it yet."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def test_ii_a_real_irc_client(start_server, data, tmp_path):
    assert shutil.which("ii"), "ii is not installed (the Makefile's apt packages include it)"
    srv = serve(start_server, data)
    root = tmp_path / "irc"
    env = dict(os.environ, IIPASS="pw-alice")
    ii = subprocess.Popen(["ii", "-s", "127.0.0.1", "-p", str(srv.port), "-n", "alice", "-k",
                           "IIPASS", "-i", str(root)], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    try:
        server_dir = root / "127.0.0.1"
        wait_for(lambda: (server_dir / "in").exists(), what="ii's in FIFO")
        wait_for(lambda: "Welcome to the yard chat, alice" in read_if_there(server_dir / "out"),
                 what="ii logged in")
        with open(server_dir / "in", "w") as f:
            f.write("/j #room\n")
        chan = server_dir / "#room"
        wait_for(lambda: (chan / "in").exists(), what="ii joined #room")
        b = login_pass(srv.port, "bob", "pw-bob")
        b.send("JOIN #room")
        b.expect(r" 366 ")
        with open(chan / "in", "w") as f:
            f.write("hello from ii\n")
        b.expect(r"^:alice!alice@yard PRIVMSG #room :hello from ii$")
        b.send("PRIVMSG #room :hello ii")
        wait_for(lambda: "<bob> hello ii" in read_if_there(chan / "out"),
                 what="ii received bob's message")
    finally:
        ii.terminate()
        ii.wait(10)


def test_plain_client_fetches_older_messages_and_marks_read(start_server, data):
    """/history (what paging up past the buffer does in the terminal UI) fetches the page
    of messages before the oldest one shown with CHATHISTORY, then the page before that;
    what the client showed is marked read on the server (MARKREAD)."""
    srv = serve(start_server, data)
    bob = login_pass(srv.port, "bob", "pw-bob")
    bob.send("JOIN #old", *[f"PRIVMSG #old :old {k} 🗂" for k in range(80)], "PING sent")
    bob.expect(r" PONG yard :sent$")
    a = Plain(srv.port, "alice", "--join", "#old")
    a.expect("* joined #old")
    bob.send("PRIVMSG #old :new one")
    a.expect("[#old] <bob> new one")
    a.say("/history")
    a.expect("* 50 older messages of #old:")
    a.expect("[#old] <bob> old 30 🗂")
    a.expect("[#old] <bob> old 79 🗂")
    a.expect("* (end of the older messages of #old)")
    a.say("/history")
    a.expect("* 30 older messages of #old:")
    a.expect("[#old] <bob> old 0 🗂")
    a.expect("[#old] <bob> old 29 🗂")
    a.expect("* (end of the older messages of #old)")
    a.say("/history")
    a.expect("* no older messages of #old")
    # alice's client marked what it showed as read: the time of "new one".
    check = login_sasl(srv.port, "alice", "pw-alice", caps="sasl draft/read-marker")

    def marked():
        check.send("MARKREAD #old")
        return check.expect(r"^:yard MARKREAD #old (\S+)$").group(1) != "*"
    wait_for(marked, what="alice's client to mark #old read")
    a.say("/quit")
    assert a.p.wait(10) == 0
    for c in (bob, check):
        c.close()


def test_plain_clients_talk_over_tls(start_server, data, tmp_path):
    """--tls: a client checked against the test CA talks to a plain one; a
    client that trusts only the system's CAs refuses the server and says why;
    --tls-insecure on the plain port is told the port speaks no TLS."""
    pki = make_pki(tmp_path / "pki")
    srv = start_server([BIN / "yard-serve", "--app", "chat", "--model", "epoll", "--listen",
                        "127.0.0.1:0", *tls_args(pki), "--plaintext-login", "allow",
                        "--data", data])
    tls_port = srv.tls_addrs[0][1]
    a = Plain(tls_port, "alice", "--join", "#sealed", "--tls", "--tls-ca", str(pki.ca))
    a.expect("* joined #sealed")
    b = Plain(srv.port, "bob", "--join", "#sealed")
    b.expect("* joined #sealed")
    a.expect("[#sealed] * bob joined")
    a.say("через TLS 🔐")
    b.expect("[#sealed] <alice> через TLS 🔐")
    a.say("/quit")
    assert a.p.wait(10) == 0
    assert b.finish() == 0
    untrusted = Plain(tls_port, "alice", "--tls")
    untrusted.expect("* 127.0.0.1:%d: TLS: certificate verify failed" % tls_port)
    untrusted.p.kill()
    untrusted.p.wait(5)
    insecure = Plain(srv.port, "alice", "--tls", "--tls-insecure")
    insecure.expect("* 127.0.0.1:%d: TLS: wrong version number" % srv.port)
    insecure.p.kill()
    insecure.p.wait(5)
    assert "--tls-insecure: the server's certificate is not checked" in insecure.p.stderr.read()
    for bad in (["--tls-ca", str(pki.ca)], ["--tls", "--tls-ca", str(pki.ca), "--tls-insecure"]):
        r = subprocess.run([CHAT, "connect", f"127.0.0.1:{tls_port}", "--user", "alice", "--plain",
                            *bad], capture_output=True, text=True, timeout=10,
                           env={**os.environ, "YARD_PASSWORD": "pw-alice"})
        assert r.returncode == 2 and "Try 'yard-chat --help'" in r.stderr, (bad, r.stderr)
