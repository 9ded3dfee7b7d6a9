"""Real IRC clients against the chat service: irssi and WeeChat (Debian's
packages), each in its own tmux session, log in with exactly the commands
docs/chat.md gives (read out of the doc, with the host, port, account and
password put in), join one channel and talk: what one types must appear on
the other's screen and, with the right sender, at a raw client in the
channel. The clients get their own home directories; the tmux server its own
socket; all of it goes away at the end, pass or fail."""

import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from chatlib import CHAT, add_account, login_pass
from conftest import BIN, ROOT, model_args, skip_unavailable, wait_for
from tlslib import make_pki, tls_args

pytestmark = pytest.mark.usefixtures("yard_chat_built")

DOC = ROOT / "docs" / "chat.md"
# What the doc's commands say, and what the test puts in their place.
DOC_HOST, DOC_PORT, DOC_ACCOUNT, DOC_PASSWORD = "127.0.0.1", "6667", "alice", "s3cret"
# The TLS block names a server by its host name and the conventional port.
TLS_HOST, TLS_PORT = "chat.example.org", "6697"

COLS, ROWS = 132, 40
CHANNEL = "#yard-clients"
WAIT = 15.0          # every wait on a screen or a socket is bounded by this
# irssi queues what it sends (cmds_max_at_once 5, then one per
# cmd_queue_speed 2.2 s): after its login burst, the channel queries it
# makes on JOIN and then the message wait their turn, for ~10 s.
IRSSI_SEND_WAIT = 30.0


def doc_client_commands(after: str = "Then connect with any IRC client") -> dict[str, list[str]]:
    """{client: [command, ...]} from the code block after the text `after`:
    lines "client: command" (a client may have several, taken in order);
    lines in parentheses are notes."""
    text = DOC.read_text()
    m = re.search(rf"{re.escape(after)}.*?\n```[^\n]*\n(.*?)\n```", text, re.S)
    assert m, f"{DOC}: no code block after {after!r}"
    commands: dict[str, list[str]] = {}
    for line in m.group(1).splitlines():
        if not line.strip() or line.strip().startswith("("):
            continue
        lm = re.fullmatch(r"(\w+):\s+(\S.*?)\s*", line)
        assert lm, f"{DOC}: a line of the client block is not 'client: command': {line!r}"
        commands.setdefault(lm.group(1), []).append(lm.group(2))
    return commands


def substitute(commands: list[str], client: str, values: dict[str, str],
               required: tuple[str, ...]) -> list[str]:
    """The doc's commands with each word of values (the doc's word -> ours) put in;
    every required word must be in them."""
    joined = " ".join(commands)
    for what in required:
        assert re.search(rf"\b{re.escape(what)}\b", joined), \
            f"{DOC}: the {client} commands {commands} do not mention {what!r}"
    words = re.compile(r"\b(" + "|".join(map(re.escape, values)) + r")\b")
    return [words.sub(lambda m: values[m.group(1)], c) for c in commands]


def fill_in(commands: list[str], client: str, host: str, port: int, account: str,
            password: str) -> list[str]:
    """The doc's commands with our host, port, account and password."""
    return substitute(commands, client, {DOC_HOST: host, DOC_PORT: str(port),
                                         DOC_ACCOUNT: account, DOC_PASSWORD: password},
                      (DOC_PORT, DOC_ACCOUNT, DOC_PASSWORD))


def require_programs(*names: str) -> None:
    missing = [n for n in names if not shutil.which(n)]
    if missing:
        pytest.fail(f"not installed: {', '.join(missing)} (Debian packages irssi, "
                    f"weechat-curses and tmux; 'make deps' installs them)", pytrace=False)


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")   # a zombie has exited


class Tmux:
    """A private tmux server (its own -L socket and configuration) with one
    detached session of fixed size per program."""

    def __init__(self, tmp: Path):
        self.socket = f"yard-irc-{os.getpid()}-{secrets.token_hex(4)}"
        self.conf = tmp / "tmux.conf"
        # status off: the pane is the whole COLS x ROWS; remain-on-exit: a
        # program that dies leaves its last screen for the error message.
        self.conf.write_text("set -g status off\n"
                             "set -g remain-on-exit on\n"
                             "set -g default-terminal screen\n"
                             "set -g history-limit 1000\n")
        self.env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        self.sessions: list[str] = []
        self.pids: list[int] = []
        self.server_pid = None
        self.socket_path = None

    def run(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(["tmux", "-L", self.socket, "-f", str(self.conf), *args],
                           capture_output=True, text=True, timeout=10, env=self.env,
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def start(self, session: str, argv: list[str], env: dict[str, str]) -> None:
        cmd = ["env", *(f"{k}={v}" for k, v in env.items()), *argv]
        self.run("new-session", "-d", "-s", session, "-x", str(COLS), "-y", str(ROWS), "--",
                 *cmd)
        self.sessions.append(session)
        pane_pid, server_pid, size, self.socket_path = self.run(
            "display-message", "-p", "-t", session,
            "#{pane_pid} #{pid} #{window_width}x#{window_height} #{socket_path}").split()
        self.pids.append(int(pane_pid))
        self.server_pid = int(server_pid)
        assert size == f"{COLS}x{ROWS}", f"tmux window of {session} is {size}"

    def screen(self, session: str) -> str:
        return self.run("capture-pane", "-p", "-t", session, check=False)

    def screens(self) -> str:
        return "\n".join(f"----- screen of {s} -----\n{self.screen(s).rstrip()}"
                         for s in self.sessions)

    def type(self, session: str, text: str) -> None:
        self.run("send-keys", "-t", session, "-l", "--", text)
        self.run("send-keys", "-t", session, "Enter")

    def wait(self, session: str, pattern: str, what: str, timeout: float = WAIT) -> re.Match:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.screen(session))
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"{session}: no {what} on its screen within {timeout}s "
                                     f"(looked for {pattern!r})\n{self.screens()}")
            time.sleep(0.05)

    def wait_exited(self, session: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while self.run("display-message", "-p", "-t", session, "#{pane_dead}").strip() != "1":
            if time.monotonic() > deadline:
                raise AssertionError(f"{session} did not exit within {timeout}s\n"
                                     f"{self.screens()}")
            time.sleep(0.05)

    def close(self) -> None:
        """Kill the tmux server (its programs get SIGHUP), then make sure
        every one of them is gone; SIGKILL what is left after 5 s."""
        self.run("kill-server", check=False)
        pids = self.pids + ([self.server_pid] if self.server_pid else [])
        deadline = time.monotonic() + 5
        while not all(process_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        for p in pids:
            if not process_gone(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)


@pytest.fixture
def tmux(start_server, tmp_path):
    # Depends on start_server so that it is torn down first: the clients
    # leave before the server is stopped.
    t = Tmux(tmp_path)
    yield t
    t.close()


# Where the clients would put their files in a home directory: none of them
# may appear in the real one.
HOME_FILES = [".irssi", ".weechat", ".config/weechat", ".local/share/weechat",
              ".cache/weechat", ".config/irssi"]


def start_irssi(tmux: "Tmux", tmp_path: Path) -> None:
    """irssi in its own home under tmp_path, waited for until its prompt shows."""
    tmux.start("irssi", ["irssi", f"--home={tmp_path / 'irssi-home' / 'irssi'}"],
               client_env(tmp_path / "irssi-home"))
    tmux.wait("irssi", r"\[\(status\)\]", "prompt of a started irssi")


def start_weechat(tmux: "Tmux", tmp_path: Path) -> None:
    """WeeChat in its own home under tmp_path, waited for until its irc plugin is
    loaded. tmux types far faster than a person: two commands typed back to back can
    reach WeeChat in one read, which it takes for a paste and holds for a yes/no
    question, so its paste question is off."""
    tmux.start("weechat", ["weechat", "--dir", str(tmp_path / "weechat-home" / "weechat"),
                           "-r", "/set weechat.look.paste_max_lines -1"],
               client_env(tmp_path / "weechat-home"))
    tmux.wait("weechat", r"Plugins loaded:.*\birc\b", "start of WeeChat with its irc plugin")


def client_env(home: Path) -> dict[str, str]:
    home.mkdir()
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local/state"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


# epoll, and uring, the model most unlike the others in how it does its I/O.
@pytest.mark.models(names=["epoll", "uring"])
def test_irssi_and_weechat_talk_with_the_documented_commands(start_server, tmux, tmp_path, model):
    require_programs("tmux", "irssi", "weechat")
    skip_unavailable(model)
    doc = doc_client_commands()
    for client in ("irssi", "WeeChat"):
        assert doc.get(client), f"{DOC}: no {client} commands in the client block"
    real_home = Path(os.path.expanduser("~"))
    home_before = {f for f in HOME_FILES if (real_home / f).exists()}

    data = tmp_path / "data"
    pw = {"bob": "irssi-pw-" + secrets.token_hex(4), "alice": "weechat-pw-" + secrets.token_hex(4),
          "carol": "pw-carol"}
    for name, password in pw.items():
        add_account(data, name, password, cost=4)
    srv = start_server([BIN / "yard-serve", "--app", "chat", *model_args(model), "--listen",
                        "127.0.0.1:0", "--data", data])

    # carol, a raw client, is in the channel first and sees what the server relays.
    carol = login_pass(srv.port, "carol", pw["carol"], timeout=WAIT)
    try:
        carol.send(f"JOIN {CHANNEL}")
        carol.expect(r" 366 ", timeout=WAIT)

        # irssi (bob) logs in with the server password (PASS) and joins.
        irssi_cmds = fill_in(doc["irssi"], "irssi", srv.host, srv.port, "bob", pw["bob"])
        start_irssi(tmux, tmp_path)
        for cmd in irssi_cmds:
            tmux.type("irssi", cmd)
        tmux.wait("irssi", r"Welcome to the yard chat, bob\b", "welcome (001) for bob")
        tmux.type("irssi", f"/join {CHANNEL}")
        tmux.wait("irssi", rf"bob \[bob@yard\] has joined {CHANNEL}\b", "join of bob")

        # WeeChat (alice) logs in with SASL PLAIN and joins the same channel.
        weechat_cmds = fill_in(doc["WeeChat"], "WeeChat", srv.host, srv.port, "alice",
                               pw["alice"])
        start_weechat(tmux, tmp_path)
        for cmd in weechat_cmds:
            tmux.type("weechat", cmd)
        tmux.wait("weechat", r"SASL authentication successful", "SASL success (903)")
        tmux.wait("weechat", r"Welcome to the yard chat, alice\b", "welcome (001) for alice")
        tmux.type("weechat", f"/join {CHANNEL}")
        tmux.wait("weechat", rf"alice (\S+ )*\(alice@yard\) has joined {CHANNEL}\b", "join of alice")
        # Presence: irssi sees alice join; WeeChat's nick list counts all three
        # (its status bar shows the count in braces).
        tmux.wait("irssi", rf"alice \[alice@yard\] has joined {CHANNEL}\b", "alice's join on irssi")
        tmux.wait("weechat", rf"{CHANNEL}\(\+nt\)\{{3\}}", "three nicks in WeeChat's list")

        # irssi -> server -> WeeChat and carol.
        text = irssi_text = f"hello from irssi {secrets.token_hex(4)}"
        tmux.type("irssi", text)
        carol.expect(rf"^:bob!bob@yard PRIVMSG {CHANNEL} :{re.escape(text)}$",
                     timeout=IRSSI_SEND_WAIT)
        tmux.wait("weechat", rf"\bbob\s+\|\s+{re.escape(text)}(?!\S)", "irssi's message")

        # WeeChat -> server -> irssi and carol.
        text = f"hello from weechat {secrets.token_hex(4)}"
        tmux.type("weechat", text)
        carol.expect(rf"^:alice!alice@yard PRIVMSG {CHANNEL} :{re.escape(text)}$", timeout=WAIT)
        tmux.wait("irssi", rf"<.?alice> {re.escape(text)}(?!\S)", "WeeChat's message")

        # Each asks WHOIS of the other: the account, the channel and an away message in UTF-8.
        tmux.type("weechat", "/away на обеде 🍜")
        tmux.wait("weechat", r"alice away: на обеде 🍜", "WeeChat's away state")

        def alice_away():  # WeeChat shows the state as it sends: wait for the server's
            carol.send("USERHOST alice")
            return carol.expect(r" 302 carol :(.*)$", timeout=WAIT).group(1) == "alice=-alice@yard"
        wait_for(alice_away, timeout=WAIT, what="the server to have alice away")
        tmux.type("irssi", "/whois alice")
        tmux.type("irssi", "/window 1")  # irssi prints WHOIS in its status window
        tmux.wait("irssi", rf"channels\s*:\s*{CHANNEL}\b", "irssi's WHOIS: channels")
        tmux.wait("irssi", r"away\s*:\s*на обеде 🍜", "irssi's WHOIS: the away message")
        tmux.wait("irssi", r"account\s*:\s*alice\b", "irssi's WHOIS: the account")
        tmux.wait("irssi", r"End of WHOIS", "irssi's WHOIS: its end")
        tmux.type("weechat", "/whois bob")
        tmux.type("weechat", "/buffer 1")  # WeeChat prints WHOIS in the server's buffer
        tmux.wait("weechat", rf"\[bob\]\s+{CHANNEL}\b", "WeeChat's WHOIS: channels")
        tmux.wait("weechat", r"\[bob\].*is logged in as\b", "WeeChat's WHOIS: the account")

        # A topic change, and carol leaving with a reason: both clients show it, and
        # WeeChat's nick list shrinks.
        carol.send(f"TOPIC {CHANNEL} :plans 🌱 план")
        tmux.type("weechat", f"/buffer {CHANNEL}")
        tmux.type("irssi", "/window 2")
        tmux.wait("irssi", rf"carol changed the topic of {CHANNEL} to: plans 🌱 план",
                  "the topic change on irssi")
        tmux.wait("weechat", r"carol has changed topic for \S+ to \"plans 🌱 план\"",
                  "the topic change on WeeChat")
        carol.send(f"PART {CHANNEL} :see you 👋")
        tmux.wait("irssi", rf"carol \[carol@yard\] has left {CHANNEL} \[see you 👋\]",
                  "carol's part on irssi")
        tmux.wait("weechat", rf"carol \(carol@yard\) has left {CHANNEL} \(see you 👋\)",
                  "carol's part on WeeChat")
        tmux.wait("weechat", rf"{CHANNEL}\(\+nt\)\{{2\}}", "two nicks in WeeChat's list")

        # WeeChat reconnects and fetches what irssi said with CHATHISTORY (WeeChat 3.8 has
        # no command of its own for it: /quote): the message is on its screen a second time.
        tmux.type("weechat", "/reconnect")
        tmux.wait("weechat", rf"(?s)(alice (\S+ )*\(alice@yard\) has joined {CHANNEL}\b.*){{2}}",
                  "alice's join again after /reconnect")
        tmux.type("weechat", f"/quote CHATHISTORY LATEST {CHANNEL} * 20")
        tmux.wait("weechat", rf"(?s)(\bbob\s+\|\s+{re.escape(irssi_text)}(?!\S).*){{2}}",
                  "irssi's message again, from CHATHISTORY")

        # Both leave by themselves.
        tmux.type("irssi", "/quit")
        tmux.type("weechat", "/quit")
        tmux.wait_exited("irssi")
        tmux.wait_exited("weechat")
    finally:
        carol.close()

    assert (tmp_path / "irssi-home" / "irssi" / "config").exists(), "irssi did not use --home"
    assert (tmp_path / "weechat-home" / "weechat" / "irc.conf").exists(), \
        "WeeChat did not use --dir"
    written = {f for f in HOME_FILES if (real_home / f).exists()} - home_before
    assert not written, f"a client wrote to the real home directory: {sorted(written)}"


def fill_in_tls(commands: list[str], client: str, port: int, account: str, password: str,
                ca: Path) -> list[str]:
    """The TLS block's commands for our server (its certificate is for localhost, from
    the test's own CA), with that CA given to the client the way the block's note says."""
    values = {TLS_HOST: "localhost", TLS_PORT: str(port), DOC_ACCOUNT: account,
              DOC_PASSWORD: password}
    out = substitute(commands, client, values, tuple(values))
    if client == "irssi":
        return [c.replace(" -tls ", f" -tls -tls_cafile {ca} ", 1) for c in out]
    return [f"/set weechat.network.gnutls_ca_user {ca}", *out]


@pytest.mark.models(names=["epoll", "uring"])
def test_irssi_and_weechat_talk_over_tls_with_the_documented_commands(start_server, tmux,
                                                                      tmp_path, model):
    require_programs("tmux", "irssi", "weechat")
    skip_unavailable(model)
    pki = make_pki(tmp_path / "pki")
    doc = doc_client_commands("Over TLS, connect with")
    data = tmp_path / "data"
    pw = {"bob": "irssi-tls-" + secrets.token_hex(4), "alice": "weechat-tls-" + secrets.token_hex(4)}
    for name, password in pw.items():
        add_account(data, name, password, cost=4)
    srv = start_server([BIN / "yard-serve", "--app", "chat", *model_args(model), "--listen",
                        "127.0.0.1:0", *tls_args(pki, "localhost:0"), "--data", data])
    tls_port = srv.tls_addrs[0][1]

    start_irssi(tmux, tmp_path)
    for cmd in fill_in_tls(doc["irssi"], "irssi", tls_port, "bob", pw["bob"], pki.ca):
        tmux.type("irssi", cmd)
    tmux.wait("irssi", r"Protocol: TLSv1\.[23]", "irssi's TLS handshake")
    tmux.wait("irssi", r"Welcome to the yard chat, bob\b", "welcome (001) for bob over TLS")
    tmux.type("irssi", f"/join {CHANNEL}")
    tmux.wait("irssi", rf"bob \[bob@yard\] has joined {CHANNEL}\b", "join of bob")

    start_weechat(tmux, tmp_path)
    for cmd in fill_in_tls(doc["WeeChat"], "WeeChat", tls_port, "alice", pw["alice"], pki.ca):
        tmux.type("weechat", cmd)
    tmux.wait("weechat", r"SASL authentication successful", "SASL success (903) over TLS")
    tmux.wait("weechat", r"Welcome to the yard chat, alice\b", "welcome (001) for alice")
    tmux.type("weechat", f"/join {CHANNEL}")
    tmux.wait("irssi", rf"alice \[alice@yard\] has joined {CHANNEL}\b", "alice's join on irssi")

    text = f"über TLS ✓ {secrets.token_hex(4)}"
    tmux.type("weechat", text)
    tmux.wait("irssi", rf"<.?alice> {re.escape(text)}(?!\S)", "WeeChat's message on irssi")
    assert "connection closed" not in srv.stderr(), srv.stderr()
    tmux.type("irssi", "/quit")
    tmux.type("weechat", "/quit")
    tmux.wait_exited("irssi")
    tmux.wait_exited("weechat")
