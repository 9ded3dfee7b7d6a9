#!/usr/bin/env python3
"""Issue 44's second round of abuse, scaled to seconds, against a server
binary (run it on two builds to compare):

- nick: 16 guests from one address, each in the same 50 channels, change
  nick as fast as the server lets them for --seconds: changes accepted,
  nick records written to the log, changes an account in all 50 channels
  was told of, and the probe's delivery times;
- list: 16 guests from one address send LIST (--channels channels) as fast
  as they are allowed and never read, for --seconds: the server's RSS
  growth and the probe's delivery times; then the same with guests that
  read: the bytes they were sent;
- history: a log of --history-messages messages of 300 bytes to #hist,
  then 8 accounts and --history-guests guests (default 16, each from an
  address of its own) in #hist repeat `CHATHISTORY TARGETS` over the whole
  log (limit 1000), each as soon as its last answer ended, for --seconds:
  answers served, and the probe's delivery times;
- who: a channel of --who-members silent guests (600 by default, 15 from
  each of 40 addresses), and 16 guests from one address in it sending
  `WHO #big` as fast as they are allowed, for --seconds: first never
  reading (the server's RSS growth and the probe's delivery times), then
  reading (the bytes they were sent);
- quiet: the probe alone, for the machine's own noise;
- unregistered: 1,024 connections from 40 addresses (127.0.2.x) that never
  log in, then a login from a fresh address: did it get in, how long;
- fill: 48 guests from 3 addresses (16 each) JOIN 50 new channels each,
  then an account from a fresh address logs in and creates a channel: how
  many channels the guests got, and how long the account took.

The probe: two accounts in #probe, one sending a timestamped message every
20 ms, the other timing its arrival. The server runs on CPU 0 (taskset),
this script on the rest, unless --no-pin (a shared machine: nothing is
pinned). Standard library only; every loop is bounded in count and time;
loopback only.

usage: bench/chat_abuse2.py [--bin build/bin] [--model epoll] [--seconds 5]
                            [--channels 500] [--history-messages 300000]
                            [--history-guests 16] [--who-members 600] [--no-pin]
                            [--scenarios quiet,nick,list,who,history,unregistered,fill]
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Client:
    """A line client on its own socket; lines go to on_line from a reader thread."""

    def __init__(self, port, source="127.0.0.1", rcvbuf=None, read=True):
        self.s = socket.socket()
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.bind((source, 0))
        self.s.connect(("127.0.0.1", port))
        self.lines = []
        self.bytes = 0
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.closed = False
        self.on_line = None
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            try:
                data = self.s.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                with self.cond:
                    self.closed = True
                    self.cond.notify_all()
                return
            self.bytes += len(data)
            buf += data
            *done, buf = buf.split(b"\r\n")
            for raw in done:
                line = raw.decode(errors="replace")
                if self.on_line:
                    self.on_line(line)
                with self.cond:
                    self.lines.append(line)
                    self.cond.notify_all()

    def send(self, *lines):
        try:
            self.s.sendall("".join(ln + "\r\n" for ln in lines).encode())
            return True
        except OSError:
            return False

    def try_send(self, *lines):
        """What the socket takes now (an attacker never waits for the server)."""
        try:
            self.s.send("".join(ln + "\r\n" for ln in lines).encode(), socket.MSG_DONTWAIT)
        except OSError:
            pass

    def wait(self, pattern, timeout=30.0, since=0):
        """The first line from index since on that matches pattern."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = since
        with self.cond:
            while True:
                while i < len(self.lines):
                    if rx.search(self.lines[i]):
                        return self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise TimeoutError(f"{pattern!r}; last {self.lines[-3:]}")
                self.cond.wait(left)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def rss_kib(pid, kids=()):
    """The RSS of the server and the children given (no pgrep in the sampling loop: a
    fork of this process every 50 ms would delay the probe's own threads)."""
    total = 0
    for p in [pid, *kids]:
        try:
            for ln in Path(f"/proc/{p}/status").read_text().splitlines():
                if ln.startswith("VmRSS:"):
                    total += int(ln.split()[1])
        except OSError:
            pass
    return total


def cpu_s(pid):
    """CPU seconds the server's process has used (user + system)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def children(pid):
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]
    except OSError:
        return []


PIN = True  # the server on CPU 0, this script on the others (--no-pin: neither)


class Server:
    def __init__(self, bindir, model, data, flags=()):
        argv = ["taskset", "-c", "0"] if PIN else []
        argv += [str(bindir / "yard-serve"), "--app", "chat", "--model",
                 model, "--listen", "127.0.0.1:0", "--data", str(data), *flags]
        self.err = open(data / "stderr", "wb")
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err)
        line = self.p.stdout.readline().decode()
        m = re.search(r"listening \S+:(\d+)", line)
        if not m:
            raise RuntimeError(f"no listening line: {line!r}")
        self.port = int(m.group(1))

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.err.close()


def login(port, name, source="127.0.0.1"):
    c = Client(port, source)
    c.send(f"PASS pw-{name}", f"NICK {name}", f"USER {name} 0 * :{name}")
    c.wait(rf" 001 {name} ")
    return c


def guest(port, nick, source, **kw):
    c = Client(port, source, **kw)
    c.send(f"NICK {nick}", f"USER {nick} 0 * :{nick}")
    return c


class Probe:
    """pa sends a timestamped message every 20 ms to #probe; pb times it."""

    def __init__(self, port):
        self.pa, self.pb = login(port, "pa"), login(port, "pb")
        for c, n in ((self.pa, "pa"), (self.pb, "pb")):
            c.send("JOIN #probe")
            c.wait(rf" 366 {n} #probe ")
        self.lat = []
        self.pb.on_line = self._line
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._send, daemon=True)

    def _line(self, line):
        m = re.search(r"PRIVMSG #probe :t(\d+)$", line)
        if m:
            self.lat.append((time.monotonic_ns() - int(m.group(1))) / 1e6)

    def _send(self):
        while not self.stop.wait(0.02):
            self.pa.send(f"PRIVMSG #probe :t{time.monotonic_ns()}")

    def start(self):
        self.t.start()

    def finish(self, grace=5.0):
        self.stop.set()
        self.t.join()
        deadline = time.monotonic() + grace
        sent = None
        while time.monotonic() < deadline and len(self.lat) != sent:
            sent = len(self.lat)
            time.sleep(0.3)
        lat = sorted(self.lat)
        if not lat:
            return "no deliveries"
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
        return f"probe p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {lat[-1]:.1f} ms ({len(lat)})"


def make_data(bindir, tmp, extra=()):
    data = Path(tmp) / "data"
    data.mkdir()
    for n in ("pa", "pb", "owner", *extra):
        subprocess.run([bindir / "yard-chat", "account", "add", n, "--data", data, "--cost", "4"],
                       input=f"pw-{n}\n", capture_output=True, text=True, check=True)
    return data


def count_records(bindir, data, kind):
    p = subprocess.Popen([bindir / "yard-chat", "log", "dump", "--data", data],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    n = total = 0
    for line in p.stdout:
        total += 1
        if f'"type": "{kind}"' in line:
            n += 1
    p.wait()
    return n, total


def nick(bindir, model, seconds):
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp)
        srv = Server(bindir, model, data, ["--guests"])
        try:
            chans = [f"#n{i:02d}" for i in range(50)]
            owner = login(srv.port, "owner")
            owner.send("JOIN " + ",".join(chans[:25]), "JOIN " + ",".join(chans[25:]))
            owner.wait(r" 366 owner #n49 ")
            heard = [0]
            owner.on_line = lambda ln: heard.__setitem__(0, heard[0] + (" NICK :" in ln))
            probe = Probe(srv.port)
            gs = []
            for i in range(16):
                g = guest(srv.port, f"g{i}x0", "127.0.0.2")
                g.wait(rf" 001 g{i}x0 ")
                g.send("JOIN " + ",".join(chans[:25]), "JOIN " + ",".join(chans[25:]))
                g.wait(rf" 366 g{i}x0 #n49 ")
                gs.append(g)
            time.sleep(1.0)  # the joins' presence relayed before counting starts
            heard[0] = 0
            before, _ = count_records(bindir, data, "nick")
            cpu0 = cpu_s(srv.p.pid)
            probe.start()
            stop = time.monotonic() + seconds
            accepted = [0] * 16

            def run(i):
                g, k = gs[i], 0
                while time.monotonic() < stop:
                    k += 1
                    g.send(f"NICK g{i}x{k}")
                    try:
                        line = g.wait(rf"NICK :g{i}x{k}$| 437 .* g{i}x{k} | 433 ", timeout=30)
                    except TimeoutError:
                        break
                    if " NICK :" in line:
                        accepted[i] += 1
                    with g.cond:
                        g.lines.clear()

            ts = [threading.Thread(target=run, args=(i,)) for i in range(16)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            cpu = cpu_s(srv.p.pid) - cpu0
            lat = probe.finish()
            time.sleep(1.0)
            after, total = count_records(bindir, data, "nick")
            drops = open(data / "stderr", errors="replace").read().count("queue for the log is full")
            print(f"nick ({model}, {seconds} s): {sum(accepted)} changes accepted, "
                  f"{after - before} nick records ({(after - before) / max(1, sum(accepted)):.1f} "
                  f"per change), the account in all 50 told of {heard[0]}, "
                  f"'queue full' warnings {drops}, server CPU {cpu:.2f} s; {lat}")
        finally:
            srv.stop()


def flood(srv, data, prefix, first, line, seconds, reading, what):
    """16 guests from one address send `first`, then `line` 20 at a time every 50 ms for
    seconds, reading their answers or not (then with a probe beside them); prints what it
    cost the server, what before it. Returns the guests."""
    probe = Probe(srv.port) if not reading else None
    kids = children(srv.p.pid)
    rss0 = rss_kib(srv.p.pid, kids)
    gs = [guest(srv.port, f"{prefix}{i}", "127.0.0.3", rcvbuf=None if reading else 4096,
                read=reading) for i in range(16)]
    for g in gs:
        if first:
            g.send(*first)
    cpu0 = cpu_s(srv.p.pid)
    if probe:
        probe.start()
    stop = time.monotonic() + seconds
    peak = rss0
    while time.monotonic() < stop:
        for g in gs:
            g.try_send(*[line] * 20)
        peak = max(peak, rss_kib(srv.p.pid, kids))
        time.sleep(0.05)
    cpu = cpu_s(srv.p.pid) - cpu0
    closed = open(data / "stderr", errors="replace").read().count("send queue exceeded")
    if reading:
        got = sum(g.bytes for g in gs)
        print(f"{what}, guests that read): {got / 1e6:.1f} MB sent to 16 guests, "
              f"server CPU {cpu:.2f} s")
    else:
        print(f"{what}, guests that do not read): server RSS {rss0 / 1024:.1f} -> peak "
              f"{peak / 1024:.1f} MiB (+{(peak - rss0) / 1024:.1f}), 'send queue exceeded' "
              f"{closed}, server CPU {cpu:.2f} s; {probe.finish()}")
    return gs


def list_once(bindir, model, seconds, nchan, reading):
    """One server: 16 guests sending LIST, reading their answers or not."""
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp)
        srv = Server(bindir, model, data, ["--guests", "--max-channels-per-account",
                                           str(nchan + 10)])
        try:
            owner = login(srv.port, "owner")
            for i in range(0, nchan, 10):
                owner.send("JOIN " + ",".join(f"#l{j:04d}" for j in range(i, i + 10)))
            owner.wait(rf" 366 owner #l{nchan - 1:04d} ", timeout=120)
            gs = flood(srv, data, "g", [], "LIST", seconds, reading,
                       f"list ({model}, {nchan} channels, {seconds} s")
            for g in gs:
                g.close()
        finally:
            srv.stop()


def list_(bindir, model, seconds, nchan):
    list_once(bindir, model, seconds, nchan, reading=False)
    list_once(bindir, model, seconds, nchan, reading=True)


def settle(pid, timeout=30.0):
    """Until the server has used less than 20 ms of CPU in a quarter of a second."""
    deadline = time.monotonic() + timeout
    last = cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = cpu_s(pid)
        if now - last < 0.02:
            return
        last = now


def who_members(port, owner, n):
    """n guests that never read in #big, 15 from each address 127.0.6.x (under the
    per-address guest limit); returns their sockets once the owner's WHO counts them."""
    ms = []
    for i in range(n):
        c = Client(port, f"127.0.6.{1 + i // 15}", read=False)
        c.send(f"NICK m{i}", f"USER m{i} 0 * :m{i}", "JOIN #big")
        ms.append(c)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        since = len(owner.lines)
        owner.send("WHO #big")
        owner.wait(r" 315 owner #big ", since=since)
        with owner.cond:
            seen = sum(" 352 owner #big " in ln for ln in owner.lines[since:])
        if seen >= n + 1:
            return ms
        time.sleep(0.5)
    raise TimeoutError(f"only {seen - 1} of {n} members joined #big")


def who_once(bindir, model, seconds, members, reading):
    """One server: 16 guests in a channel of members send WHO on it, reading or not."""
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp)
        srv = Server(bindir, model, data, ["--guests"])
        try:
            owner = login(srv.port, "owner")
            owner.send("JOIN #big")
            owner.wait(r" 366 owner #big ")
            ms = who_members(srv.port, owner, members)
            settle(srv.p.pid)  # the members' joins relayed to each other before counting
            gs = flood(srv, data, "w", ["JOIN #big"], "WHO #big", seconds, reading,
                       f"who ({model}, {members} members, {seconds} s")
            for c in gs + ms:
                c.close()
        finally:
            srv.stop()


def who(bindir, model, seconds, members):
    who_once(bindir, model, seconds, members, reading=False)
    who_once(bindir, model, seconds, members, reading=True)


def quiet(bindir, model, seconds):
    """The probe alone: what the machine gives it without an attack."""
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp)
        srv = Server(bindir, model, data, ["--guests"])
        try:
            probe = Probe(srv.port)
            probe.start()
            time.sleep(seconds)
            print(f"quiet ({model}, {seconds} s, no attack): {probe.finish()}")
        finally:
            srv.stop()


def history(bindir, model, seconds, messages, guests):
    readers = [f"h{i}" for i in range(8)]
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp, readers)
        subprocess.run([bindir / "yard-chat", "log", "generate", "--data", data, "--messages",
                        str(messages), "--target", "#hist", "--text-bytes", "300"],
                       capture_output=True, check=True)
        srv = Server(bindir, model, data, ["--guests"] if guests else [])
        try:
            cs = []
            for n in readers:
                c = login(srv.port, n)
                c.send("CAP REQ :batch draft/chathistory", "JOIN #hist")
                c.wait(rf" 366 {n} #hist ")
                cs.append(c)
            # The guests, from addresses of their own (the per-address guest limit), ask the
            # same as the accounts do: a guest may read the history of a channel it is in.
            for i in range(guests):
                n = f"g{i}"
                c = guest(srv.port, n, f"127.0.5.{1 + i}")
                c.send("CAP REQ :batch draft/chathistory", "JOIN #hist")
                c.wait(rf" 366 {n} #hist ")
                cs.append(c)
            probe = Probe(srv.port)
            stop = threading.Event()
            answers = [0] * len(cs)

            def run(i):
                c = cs[i]
                while not stop.is_set():
                    since = len(c.lines)
                    c.send("CHATHISTORY TARGETS timestamp=2000-01-01T00:00:00.000Z "
                           "timestamp=2100-01-01T00:00:00.000Z 1000")
                    try:
                        c.wait(r"^:\S+ BATCH -|FAIL CHATHISTORY", timeout=30, since=since)
                    except TimeoutError:
                        return
                    answers[i] += 1

            ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(cs))]
            probe.start()
            for t in ts:
                t.start()
            time.sleep(seconds)
            stop.set()
            for t in ts:
                t.join(35)
            print(f"history ({model}, {seconds} s, {messages:,} messages, 8 accounts and "
                  f"{guests} guests asking): "
                  f"{sum(answers)} TARGETS answers; {probe.finish()}")
            for c in cs:
                c.close()
        finally:
            srv.stop()


def unregistered(bindir, model):
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp)
        srv = Server(bindir, model, data, ["--registration-timeout-ms", "60000"])
        try:
            crowd = []
            for i in range(1024):
                c = Client(srv.port, f"127.0.2.{1 + i % 40}", read=False)
                crowd.append(c)
            time.sleep(2.0)  # every one accepted and counted
            t0 = time.monotonic()
            c = Client(srv.port, "127.0.3.1")
            c.send("PASS pw-owner", "NICK owner", "USER owner 0 * :owner")
            try:
                line = c.wait(r" 001 owner |^ERROR ", timeout=10)
                verdict = "logged in" if " 001 " in line else line
            except TimeoutError as e:
                verdict = f"no answer ({e})"
            took = time.monotonic() - t0
            print(f"unregistered ({model}): 1,024 idle connections from 40 addresses, a login "
                  f"from a fresh one: {verdict} in {took:.3f} s")
            for c in crowd:
                c.close()
        finally:
            srv.stop()


def fill(bindir, model):
    """48 guests from 3 addresses (16 each, the per-address limit) JOIN 50 new channels each;
    then an account logs in from a fresh address and creates one: how long that takes, and
    how many channels the guests hold (at most --guests-channel-share of --max-channels)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(bindir, tmp)
        srv = Server(bindir, model, data, ["--guests"])
        try:
            gs = [guest(srv.port, f"f{i}", f"127.0.4.{1 + i % 3}") for i in range(48)]
            for i, g in enumerate(gs):
                g.wait(rf" 001 f{i} ")
                for k in range(0, 50, 10):
                    g.send("JOIN " + ",".join(f"#f{i}x{j}" for j in range(k, k + 10)))
            made = refused = 0
            for i, g in enumerate(gs):  # an answer to every JOIN: 366 or 405
                last = rf" (366|405) f{i} #f{i}x49 "
                g.wait(last, timeout=120)
                with g.cond:
                    made += sum(" 366 " in ln for ln in g.lines)
                    refused += sum(" 405 " in ln for ln in g.lines)
            t0 = time.monotonic()
            c = Client(srv.port, "127.0.3.1")
            c.send("PASS pw-owner", "NICK owner", "USER owner 0 * :owner", "JOIN #mine")
            try:
                line = c.wait(r" (366|405|403) owner #mine |^ERROR ", timeout=10)
                verdict = "created #mine" if " 366 " in line else line
            except TimeoutError as e:
                verdict = f"no answer ({e})"
            took = time.monotonic() - t0
            print(f"fill ({model}): 48 guests from 3 addresses asked for 2,400 channels: "
                  f"{made} made, {refused} refused (405); then an account from a fresh "
                  f"address logged in and {verdict} in {took:.3f} s")
            for g in gs + [c]:
                g.close()
        finally:
            srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--model", default="epoll")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--channels", type=int, default=500)
    ap.add_argument("--history-messages", type=int, default=300000)
    ap.add_argument("--history-guests", type=int, default=16,
                    help="guests asking CHATHISTORY beside the 8 accounts (default 16)")
    ap.add_argument("--who-members", type=int, default=600,
                    help="silent guests in the channel of the who scenario (default 600)")
    ap.add_argument("--no-pin", action="store_true",
                    help="pin nothing (a shared machine): the server and this script run "
                         "where the scheduler puts them")
    ap.add_argument("--scenarios", default="nick,list,unregistered")
    a = ap.parse_args()
    bindir = Path(a.bin).resolve()
    global PIN
    PIN = not a.no_pin
    if PIN:
        os.sched_setaffinity(0, {c for c in os.sched_getaffinity(0) if c != 0} or {0})
    for sc in a.scenarios.split(","):
        if sc == "nick":
            nick(bindir, a.model, a.seconds)
        elif sc == "list":
            list_(bindir, a.model, a.seconds, a.channels)
        elif sc == "unregistered":
            unregistered(bindir, a.model)
        elif sc == "history":
            history(bindir, a.model, a.seconds, a.history_messages, a.history_guests)
        elif sc == "who":
            who(bindir, a.model, a.seconds, a.who_members)
        elif sc == "quiet":
            quiet(bindir, a.model, a.seconds)
        elif sc == "fill":
            fill(bindir, a.model)
        else:
            sys.exit(f"unknown scenario {sc}")


if __name__ == "__main__":
    main()
