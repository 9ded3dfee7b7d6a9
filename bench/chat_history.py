#!/usr/bin/env python3
"""The chat service's history benchmarks (issue 18), on this machine's two cores:

  history  CHATHISTORY LATEST #bench * 100 on a channel with --messages logged messages
           (made by `yard-chat log generate`), first on an idle server, then while
           yard-load chat runs 64 members x --rate messages/s in the same channel; the
           latency of each request from its send to the end of its batch, p50/p99/max.
  persist  messages per second the log takes with --fsync interval: yard-load chat with
           8 senders, open loop at each --rate; a rate counts when every message reached
           every member (no errors) and the generator kept its schedule.

Server on CPU 0; yard-load and this client on CPU 1. Prints one JSON object per result.

  usage: bench/chat_history.py [--bin build/bin] [--model epoll] [--messages 1000000]
                               [--requests 300] [--rate 1000] [--persist-rates 10000,20000]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Client:
    def __init__(self, port, name):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""
        self.send("CAP REQ :batch message-tags", "CAP END", f"PASS pw-{name}", f"NICK {name}",
                  f"USER {name} 0 * :{name}")
        self.wait(rb" 001 ")

    def send(self, *lines):
        self.sock.sendall("".join(ln + "\r\n" for ln in lines).encode())

    def lines(self):
        while True:
            while b"\r\n" in self.buf:
                line, self.buf = self.buf.split(b"\r\n", 1)
                yield line
            data = self.sock.recv(1 << 16)
            if not data:
                raise RuntimeError("the server closed the connection")
            self.buf += data

    def wait(self, pattern):
        rx = re.compile(pattern)
        for line in self.lines():
            if rx.search(line):
                return line

    def latest(self, chan, limit):
        """One CHATHISTORY LATEST: (seconds to the batch's end, messages in it)."""
        t0 = time.perf_counter()
        self.send(f"CHATHISTORY LATEST {chan} * {limit}")
        ref, n = None, 0
        for line in self.lines():
            if ref is None:
                m = re.match(rb"^:yard BATCH \+(\S+) chathistory ", line)
                if m:
                    ref = m.group(1)
                elif line.startswith(b":yard FAIL"):
                    raise RuntimeError(line.decode())
            elif line == b":yard BATCH -" + ref:
                return time.perf_counter() - t0, n
            elif b";batch=" + ref + b" " in line or b"@batch=" + ref + b" " in line:
                n += 1


def start_server(bin_dir, data, model, flags=()):
    p = subprocess.Popen(["taskset", "-c", "0", f"{bin_dir}/yard-serve", "--app", "chat",
                          "--model", model, "--listen", "127.0.0.1:0", "--data", data, *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    m = re.search(r"listening \S+:(\d+)", line)
    if not m:
        p.kill()
        raise RuntimeError(f"yard-serve did not start: {line!r}")
    return p, int(m.group(1))


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def load(bin_dir, port, connections, rate, seconds):
    return subprocess.Popen(["taskset", "-c", "1", f"{bin_dir}/yard-load", "chat", "--target",
                             f"127.0.0.1:{port}", "--connections", str(connections), "--rate",
                             str(rate), "--duration", f"{seconds}s", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def accounts(bin_dir, data, n):
    for i in range(n):
        subprocess.run([f"{bin_dir}/yard-chat", "account", "add", f"u{i}", "--data", data,
                        "--cost", "4"], input=f"pw-u{i}\n", text=True, check=True,
                       capture_output=True)


def history(a, data):
    t0 = time.monotonic()
    r = subprocess.run([f"{a.bin}/yard-chat", "log", "generate", "--data", data, "--messages",
                        str(a.messages), "--target", "#bench"], capture_output=True, text=True,
                       check=True)
    gen_s = time.monotonic() - t0
    srv, port = start_server(a.bin, data, a.model)
    try:
        c = Client(port, "u64")
        c.send("JOIN #bench")
        c.wait(rb" 366 u64 #bench ")
        os.sched_setaffinity(0, {1})
        results = {}
        for phase in ("idle", "live"):
            gen = load(a.bin, port, 64, a.rate, a.load_seconds) if phase == "live" else None
            if gen:
                time.sleep(2)  # the members log in and join before the requests start
            lat, sizes = [], []
            for _ in range(a.requests):
                s, n = c.latest("#bench", 100)
                lat.append(s * 1e3)
                sizes.append(n)
                if gen and gen.poll() is not None:
                    break
                time.sleep(0.02)
            out = {"phase": phase, "requests": len(lat), "messages_each": min(sizes),
                   "p50_ms": round(statistics.median(lat), 3), "p99_ms": round(pct(lat, 99), 3),
                   "max_ms": round(max(lat), 3)}
            if gen:
                stdout, stderr = gen.communicate(timeout=a.load_seconds + 60)
                d = json.loads(stdout) if gen.returncode == 0 else {}
                out["load"] = {k: d.get(k) for k in ("messages_sent", "deliveries", "errors")}
                out["load"]["p99_us"] = d.get("latency_us", {}).get("p99")
                if gen.returncode:
                    out["load_error"] = stderr.strip()[-300:]
            results[phase] = out
        return {"bench": "history", "model": a.model, "logged_messages": a.messages,
                "generate_s": round(gen_s, 2), **results}
    finally:
        stop(srv)


def persist(a, data, rate):
    srv, port = start_server(a.bin, data, a.model, ("--fsync", "interval", "--flood-rate", "0"))
    try:
        gen = load(a.bin, port, 8, rate, 10)
        stdout, stderr = gen.communicate(timeout=120)
        d = json.loads(stdout) if gen.returncode == 0 else {}
        return {"bench": "persist", "model": a.model, "rate": rate,
                "messages_sent": d.get("messages_sent"), "deliveries": d.get("deliveries"),
                "errors": d.get("errors"), "behind_schedule": d.get("behind_schedule"),
                "unsent": d.get("unsent"), "p99_us": d.get("latency_us", {}).get("p99"),
                "achieved_rate": d.get("achieved_rate"),
                "generator_cpu_pct": d.get("generator_cpu_pct"), "invalid": d.get("invalid"),
                "ok": gen.returncode == 0 and d.get("errors") == 0 and not d.get("unsent") and
                not d.get("invalid"),
                "stderr": stderr.strip()[-300:] if gen.returncode else ""}
    finally:
        stop(srv)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--model", default="epoll")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--load-seconds", type=int, default=20)
    ap.add_argument("--persist-rates", default="10000,20000")
    ap.add_argument("--skip", choices=("history", "persist"), action="append", default=[])
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="yard-chat-history.")
    try:
        if "history" not in a.skip:
            d = os.path.join(root, "history")
            accounts(a.bin, d, 65)
            print(json.dumps(history(a, d)), flush=True)
        if "persist" not in a.skip:
            for rate in (int(x) for x in a.persist_rates.split(",") if x):
                d = os.path.join(root, f"persist-{rate}")
                accounts(a.bin, d, 8)
                print(json.dumps(persist(a, d, rate)), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
