"""A small IRC client for the chat tests: register (PASS or SASL PLAIN), send
lines, and wait for lines with a deadline (never sleep-and-hope)."""

import base64
import queue
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import BIN, model_args

CHAT = BIN / "yard-chat"
# The chat tests run under every model and papayaChat's fork --pair too:
# @pytest.mark.models(extra=["fork-pair"]) (tests/variants.py).


def accounts_fixture(*names):
    """A module fixture: a data directory with these accounts (password pw-NAME)."""
    @pytest.fixture(scope="module")
    def accounts(tmp_path_factory):
        d = tmp_path_factory.mktemp("accounts")
        add_accounts(d, names)
        return d
    return accounts


def chat_fixture():
    """A fixture: chat(model, *flags, data=None) over the accounts fixture (chat_starter)."""
    @pytest.fixture
    def chat(start_server, accounts, tmp_path):
        return chat_starter(start_server, accounts, tmp_path)
    return chat


def add_account(data, name, password, cost=4):
    r = subprocess.run([CHAT, "account", "add", name, "--data", str(data), "--cost", str(cost)],
                       input=password + "\n", capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def add_accounts(data, names, cost=4):
    """Accounts with the passwords pw-NAME, in one yard-chat call (one rewrite of the file)."""
    names = list(names)
    if not names:
        return
    r = subprocess.run([CHAT, "account", "add", *names, "--data", str(data), "--cost", str(cost)],
                       input="".join(f"pw-{n}\n" for n in names), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr


class Irc:
    def __init__(self, port, host="127.0.0.1", timeout=10.0, source=None, tls=None, cert=None):
        """source: the local address to connect from (another 127.x.y.z); tls: a
        tlslib.Pki whose CA the server's certificate is checked against (TLS);
        cert: (certificate file, key file) to present as the client's."""
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        if tls is not None:
            from tlslib import client_context
            ctx = client_context(tls)
            if cert:
                ctx.load_cert_chain(*cert)
            self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
        self.raw = b""               # every byte received
        self.buf = b""
        self.lines: list[str] = []   # every line received, in order
        self.pos = 0                 # lines before this were consumed by expect()
        self.closed = False

    def send(self, *lines: str):
        self.sock.sendall("".join(line + "\r\n" for line in lines).encode())

    def _fill(self, deadline: float) -> bool:
        left = deadline - time.monotonic()
        if left <= 0 or self.closed:
            return False
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            return False
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed = True
            return False
        self.buf += data
        self.raw += data
        while b"\r\n" in self.buf:
            line, self.buf = self.buf.split(b"\r\n", 1)
            self.lines.append(line.decode(errors="replace"))
        return True

    def expect(self, pattern: str, timeout: float = 10.0) -> re.Match:
        """The next line (after those already matched) that matches pattern."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            for i in range(self.pos, len(self.lines)):
                m = rx.search(self.lines[i])
                if m:
                    self.pos = i + 1
                    return m
            if not self._fill(deadline):
                raise AssertionError(f"no line matching {pattern!r} within {timeout}s; got "
                                     f"{self.lines[self.pos:][-10:]} closed={self.closed}")

    def wait_closed(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.closed:
            if not self._fill(deadline) and not self.closed and time.monotonic() >= deadline:
                return False
        return True

    def collect(self, pattern: str, count: int, timeout: float = 30.0) -> list[re.Match]:
        """count lines matching pattern (from the unconsumed ones on)."""
        rx = re.compile(pattern)
        out = []
        deadline = time.monotonic() + timeout
        i = self.pos
        while len(out) < count:
            while i < len(self.lines) and len(out) < count:
                m = rx.search(self.lines[i])
                if m:
                    out.append(m)
                i += 1
            if len(out) < count and not self._fill(deadline):
                raise AssertionError(f"{len(out)} of {count} lines matching {pattern!r} within "
                                     f"{timeout}s; last: {self.lines[-5:]}")
        self.pos = i
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def login_pass(port, name, password, **kw) -> Irc:
    c = Irc(port, **kw)
    c.send(f"PASS {password}", f"NICK {name}", f"USER {name} 0 * :{name}")
    c.expect(r" 001 ")
    return c


def login_device(port, name, device) -> Irc:
    """name (password pw-NAME) logged in from the device called device (USER's name)."""
    c = Irc(port)
    c.send(f"PASS pw-{name}", f"NICK {name}", f"USER {device} 0 * :{name}")
    c.expect(r" 001 ")
    return c


def login_sasl(port, name, password, caps="sasl", **kw) -> Irc:
    c = Irc(port, **kw)
    c.send("CAP LS 302", f"NICK {name}", f"USER {name} 0 * :{name}")
    c.expect(r"CAP \S+ LS ")
    c.send(f"CAP REQ :{caps}")
    c.expect(r"CAP \S+ ACK ")
    c.send("AUTHENTICATE PLAIN")
    c.expect(r"^AUTHENTICATE \+")
    payload = base64.b64encode(f"\0{name}\0{password}".encode()).decode()
    c.send(f"AUTHENTICATE {payload}")
    c.expect(r" 903 ")
    c.send("CAP END")
    c.expect(r" 001 ")
    return c


def chat_starter(start_server, accounts, tmp_path):
    """start(model, *flags, data=None) -> (server, data dir): yard-serve --app
    chat on a copy of the accounts directory (one per model and test), or on
    data when given (a restart)."""

    def start(model, *flags, data=None):
        if data is None:
            data = tmp_path / f"data-{model}"
            if not data.exists():
                shutil.copytree(accounts, data)
        # --server-name yard: the replies the tests expect name the server so
        # on any host (its default is the host's name).
        argv = [BIN / "yard-serve", "--app", "chat", *model_args(model), "--listen",
                "127.0.0.1:0", "--data", data, "--server-name", "yard", *flags]
        return start_server(argv), data

    return start


class LineReader:
    """The lines of a pipe (a client's stdout), read by a thread as they
    come. expect() takes the first line not taken yet that holds a needle,
    waiting for it with a deadline; every line read so far is in .read, in
    order. strip: characters to strip off each line's end (text pipes)."""

    def __init__(self, stream, strip=None):
        self.q: queue.Queue = queue.Queue()
        self.read: list = []      # every line taken off the pipe
        self.waiting: list = []   # read, not matched by expect() yet
        threading.Thread(target=self._pump, args=(stream, strip), daemon=True).start()

    def _pump(self, stream, strip):
        for line in stream:
            self.q.put(line.rstrip(strip) if strip is not None else line)
        self.q.put(None)

    def expect(self, needle, timeout=10.0):
        deadline = time.monotonic() + timeout
        for line in self.waiting:
            if needle in line:
                self.waiting.remove(line)
                return line
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.read.append(line)
            if needle in line:
                return line
            self.waiting.append(line)
        raise AssertionError(f"no line with {needle!r}; got {self.waiting[-10:]}")

    def rest(self, timeout=10.0):
        """Read to the pipe's end (the writer exited)."""
        while (line := self.q.get(timeout=timeout)) is not None:
            self.read.append(line)
