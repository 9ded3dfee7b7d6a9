#!/usr/bin/env python3
"""What the chat service's login limits cost an attacker and spare a user,
measured against a server binary (compare two builds side by side):

- flood: 100 connections from 127.0.0.1 send wrong passwords for --seconds;
  meanwhile a real user (bcrypt cost 12) logs in from 127.0.0.2, --trials
  times: its login times, and how many of the flood's guesses were checked;
- guess: 1,000 guesses at one account from 50 addresses (127.0.1.x): how
  many were checked, how many refused at once, and how long it took;
- timing: the median time a failed login takes, for an existing account
  (cost 12) and an unknown one, 8 of each, interleaved.

The server runs on --server-cpu, this script (the clients) on the rest.
Standard library only; every loop is bounded in count and time, and all
traffic goes to loopback addresses.

usage: bench/chat_abuse.py [--bin build/bin] [--model epoll] [--seconds 6]
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def attempt(port, name, password, source, timeout=20.0):
    """One PASS login on a fresh connection: ('ok'|'incorrect'|'refused'|'error', seconds)."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                     source_address=(source, 0))
    except OSError:
        return "error", time.monotonic() - t0
    buf = b""
    try:
        s.sendall(f"PASS {password}\r\nNICK {name}\r\nUSER {name} 0 * :x\r\n".encode())
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            data = s.recv(4096)
            if not data:
                break
            buf += data
            for line in buf.split(b"\r\n"):
                if b" 001 " in line:
                    return "ok", time.monotonic() - t0
                if b" 464 " in line:
                    return "incorrect", time.monotonic() - t0
                if line.startswith(b"ERROR "):
                    return "refused", time.monotonic() - t0
    except OSError:
        pass
    finally:
        s.close()
    return "error", time.monotonic() - t0


class Server:
    def __init__(self, bindir, model, cpu, data):
        argv = ["taskset", "-c", str(cpu), str(Path(bindir) / "yard-serve"), "--app", "chat",
                "--model", model, "--listen", "127.0.0.1:0", "--data", str(data)]
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        line = self.p.stdout.readline().decode()
        if not line.startswith("listening "):
            sys.exit(f"server did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def stop(self):
        os.killpg(self.p.pid, signal.SIGTERM)
        self.p.wait(10)


def flood(port, seconds, trials):
    stop = threading.Event()
    verdicts = []
    lock = threading.Lock()

    def attacker(k):
        name = "victim" if k % 2 else f"nobody{k}"
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            v, _ = attempt(port, name, f"guess{k}", "127.0.0.1", timeout=seconds + 5)
            with lock:
                verdicts.append(v)
            stop.wait(0.2)

    threads = [threading.Thread(target=attacker, args=(k,)) for k in range(100)]
    for t in threads:
        t.start()
    logins = []
    time.sleep(0.5)   # the flood under way (a benchmark, not a test)
    for _ in range(trials):
        v, took = attempt(port, "alice", "pw-alice", "127.0.0.2", timeout=seconds + 5)
        logins.append(took if v == "ok" else float("inf"))
    stop.set()
    for t in threads:
        t.join(seconds + 30)
    return logins, verdicts


def guess(port):
    counts = {}
    lock = threading.Lock()
    t0 = time.monotonic()

    def one(i):
        v, _ = attempt(port, "victim", f"guess{i}", f"127.0.1.{10 + i % 50}")
        with lock:
            counts[v] = counts.get(v, 0) + 1

    with ThreadPoolExecutor(40) as ex:
        list(ex.map(one, range(1000)))
    return counts, time.monotonic() - t0


def timing(port):
    known, unknown = [], []
    for i in range(8):
        for name, out in (("victim", known), ("nosuchuser", unknown)):
            v, took = attempt(port, name, "wrong", f"127.0.2.{len(known) + len(unknown) + 1}")
            if v == "incorrect":
                out.append(took)
    return known, unknown


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("YARD_BIN", ROOT / "build" / "bin"))
    ap.add_argument("--model", default="epoll")
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--server-cpu", type=int, default=0)
    a = ap.parse_args()
    others = sorted(os.sched_getaffinity(0) - {a.server_cpu})
    if others:
        os.sched_setaffinity(0, others)
    data = Path(tempfile.mkdtemp(prefix="yard-chat-abuse."))
    try:
        for name, cost in (("alice", 12), ("victim", 12)):
            subprocess.run([Path(a.bin) / "yard-chat", "account", "add", name, "--data", data,
                            "--cost", str(cost)], input=f"pw-{name}\n", text=True, check=True,
                           capture_output=True)
        print(f"server: {a.bin}/yard-serve --model {a.model} on CPU {a.server_cpu}")
        for what in ("flood", "guess", "timing"):
            d = Path(tempfile.mkdtemp(prefix="yard-chat-abuse-run.", dir=data))
            shutil.copy(data / "accounts", d / "accounts")
            srv = Server(a.bin, a.model, a.server_cpu, d)
            try:
                if what == "flood":
                    logins, verdicts = flood(srv.port, a.seconds, a.trials)
                    print(f"flood: real logins from 127.0.0.2 took "
                          f"{', '.join(f'{t:.2f}' for t in logins)} s; the flood's "
                          f"{len(verdicts)} attempts: {verdicts.count('incorrect')} checked, "
                          f"{verdicts.count('refused')} refused at once, "
                          f"{verdicts.count('error')} failed to connect or timed out")
                elif what == "guess":
                    counts, took = guess(srv.port)
                    print(f"guess: 1000 guesses at one account in {took:.1f} s: "
                          f"{counts.get('incorrect', 0)} checked, "
                          f"{counts.get('refused', 0)} refused at once, "
                          f"{counts.get('error', 0)} errors")
                else:
                    known, unknown = timing(srv.port)
                    if known and unknown:
                        mk, mu = statistics.median(known), statistics.median(unknown)
                        print(f"timing: median failed login {mk * 1000:.0f} ms for an existing "
                              f"account, {mu * 1000:.0f} ms for an unknown one "
                              f"(difference {abs(mk - mu) * 1000:.1f} ms)")
            finally:
                srv.stop()
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
