#!/usr/bin/env python3
"""The chat service's history benchmarks (issue 18), on this machine's two cores:

  history  CHATHISTORY LATEST #bench * 100 on a channel with --messages logged messages
           (made by `yard-chat log generate`), first on an idle server, then while
           yard-load chat runs 64 members x --rate messages/s in the same channel; the
           latency of each request from its send to the end of its batch, p50/p99/max.
  persist  messages per second the log takes with --fsync interval: yard-load chat with
           8 senders, open loop at each --rate; a rate counts when every message reached
           every member (no errors) and the generator kept its schedule.

Standalone (the default): starts its own servers, server on CPU 0, yard-load and this
client on CPU 1, and prints one JSON object per result.

  usage: bench/chat_history.py [--bin build/bin] [--model epoll] [--messages 1000000]
                               [--requests 300] [--rate 1000] [--persist-rates 10000,20000]

Harness load (--target HOST:PORT): the three phases against a server already running
(experiments/chat_history.toml: bench/chat_serve --log-messages N, yard-serve --fsync
interval --flood-rate 0), with no pinning of its own (the harness pins it), printing one
JSON object in yard-load's shape: errors, first_error, the generator's validity fields
(invalid, behind_schedule, generator_saturated, generator_cpu_pct, behind_schedule_max_ms:
the worse of the two yard-load runs), the phases in detail, and `metrics`, the numbers the
harness keeps (history_{idle,live}_{p50,p99,max}_us, persisted_per_s, ...). Exit 1 when a
request failed or came back short, the log was not the one expected, or a yard-load run
lost messages.

  usage: bench/chat_history.py --target HOST:PORT [--bin build/bin] [--logged N]
                               [--members 64] [--rate 1000] [--duration 20]
                               [--request-rate 50] [--persist-senders 8] [--persist-rate 10000]
"""
import argparse
import ctypes
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

CHAN = "#bench"     # the channel yard-load chat joins
LIMIT = 100         # messages asked for by each CHATHISTORY LATEST


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Client:
    def __init__(self, port, name, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=30)
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

    def barrier(self, token="yard-history"):
        """Everything the server sent before this point has been read (a JOIN's replay)."""
        self.send(f"PING :{token}")
        self.wait(rb"^:\S+ PONG \S+ :" + re.escape(token.encode()) + rb"$")

    def wait_joins(self, nick_prefix, count, gen, deadline_s):
        """Read until `count` members named nick_prefix<i> have joined; False if the load
        exited or the deadline passed first."""
        rx = re.compile(rb"^(?:@\S+ )?:" + re.escape(nick_prefix.encode()) +
                        rb"(\d+)!\S+ JOIN " + re.escape(CHAN.encode()))
        seen = set()
        end = time.monotonic() + deadline_s
        self.sock.settimeout(0.2)
        try:
            while len(seen) < count:
                if time.monotonic() > end or gen.poll() is not None:
                    return False
                try:
                    for line in self.lines():
                        m = rx.match(line)
                        if m:
                            seen.add(m.group(1))
                            if len(seen) >= count:
                                break
                except socket.timeout:
                    continue
            return True
        finally:
            self.sock.settimeout(30)

    def latest(self, chan, limit):
        """One CHATHISTORY LATEST: (seconds to the batch's end, messages in it, the newest
        message's msgid)."""
        t0 = time.perf_counter()
        self.send(f"CHATHISTORY LATEST {chan} * {limit}")
        ref, n, newest = None, 0, None
        for line in self.lines():
            if ref is None:
                m = re.match(rb"^:\S+ BATCH \+(\S+) chathistory ", line)
                if m:
                    ref = m.group(1)
                elif re.match(rb"^:\S+ FAIL ", line):
                    raise RuntimeError(line.decode(errors="replace"))
            elif re.match(rb"^:\S+ BATCH -" + re.escape(ref) + rb"$", line):
                return time.perf_counter() - t0, n, newest
            elif b";batch=" + ref + b" " in line or b"@batch=" + ref + b" " in line:
                n += 1
                m = re.search(rb"[@;]msgid=([^; ]+)", line)
                newest = m.group(1).decode() if m else None

    def close(self):
        try:
            self.send("QUIT :done")
        except OSError:
            pass
        self.sock.close()


def ask(c, count, interval, gen=None):
    """`count` CHATHISTORY LATEST requests on CHAN, the k-th due `k * interval` seconds after
    the first (a late one goes at once); with a live load `gen`, no request is sent once it
    has ended. Returns the requests sent, the answers, their latencies (s), sizes, newest ids
    and the first error."""
    r = {"sent": 0, "answers": 0, "lat": [], "sizes": [], "newest": [], "error": None}
    t0 = time.monotonic()
    for k in range(count):
        delay = t0 + k * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if gen is not None and gen.poll() is not None:
            break
        r["sent"] += 1
        try:
            s, n, newest = c.latest(CHAN, LIMIT)
        except (OSError, RuntimeError) as e:
            r["error"] = f"CHATHISTORY request {k + 1}: {e}"
            break
        r["answers"] += 1
        r["lat"].append(s)
        r["sizes"].append(n)
        r["newest"].append(newest)
    return r


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


def _die_with_parent():
    """In a yard-load child: the kernel kills it if this script dies first (a harness that
    times the load step out kills this process only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def load(bin_dir, target, connections, rate, seconds, cpu=1):
    """yard-load chat against target (HOST:PORT, or a port on loopback); pinned to `cpu`
    unless it is None (the harness has pinned this process already)."""
    if isinstance(target, int):
        target = f"127.0.0.1:{target}"
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    return subprocess.Popen([*pin, f"{bin_dir}/yard-load", "chat", "--target", target,
                             "--connections", str(connections), "--rate", str(rate),
                             "--duration", f"{seconds}s", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_die_with_parent)


def finish(gen, timeout):
    """The load's exit code, its JSON ({} if none) and its stderr's tail."""
    try:
        stdout, stderr = gen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        gen.kill()
        stdout, stderr = gen.communicate()
        return None, {}, f"yard-load did not finish within {timeout} s"
    try:
        d = json.loads(stdout)
    except ValueError:
        d = {}
    return gen.returncode, d if isinstance(d, dict) else {}, stderr.strip()[-300:]


def accounts(bin_dir, data, n):
    """u0..u{n-1}, passwords pw-u0...: one yard-chat call (one rewrite of the file)."""
    subprocess.run([f"{bin_dir}/yard-chat", "account", "add", *(f"u{i}" for i in range(n)),
                    "--data", data, "--cost", "4"],
                   input="".join(f"pw-u{i}\n" for i in range(n)), text=True, check=True,
                   capture_output=True)


def history(a, data):
    t0 = time.monotonic()
    subprocess.run([f"{a.bin}/yard-chat", "log", "generate", "--data", data, "--messages",
                    str(a.messages), "--target", CHAN], capture_output=True, text=True,
                   check=True)
    gen_s = time.monotonic() - t0
    srv, port = start_server(a.bin, data, a.model)
    try:
        c = Client(port, "u64")
        c.send(f"JOIN {CHAN}")
        c.wait(rb" 366 u64 " + re.escape(CHAN.encode()) + rb" ")
        os.sched_setaffinity(0, {1})
        results = {}
        for phase in ("idle", "live"):
            gen = load(a.bin, port, 64, a.rate, a.load_seconds) if phase == "live" else None
            if gen:
                time.sleep(2)  # the members log in and join before the requests start
            r = ask(c, a.requests, 0.02, gen)
            if r["error"]:
                raise RuntimeError(r["error"])
            lat = [s * 1e3 for s in r["lat"]]
            out = {"phase": phase, "requests": len(lat), "messages_each": min(r["sizes"]),
                   "p50_ms": round(statistics.median(lat), 3), "p99_ms": round(pct(lat, 99), 3),
                   "max_ms": round(max(lat), 3)}
            if gen:
                rc, d, stderr = finish(gen, a.load_seconds + 60)
                out["load"] = {k: d.get(k) for k in ("messages_sent", "deliveries", "errors")}
                out["load"]["p99_us"] = d.get("latency_us", {}).get("p99")
                if rc:
                    out["load_error"] = stderr
            results[phase] = out
        return {"bench": "history", "model": a.model, "logged_messages": a.messages,
                "generate_s": round(gen_s, 2), **results}
    finally:
        stop(srv)


def persist(a, data, rate):
    srv, port = start_server(a.bin, data, a.model, ("--fsync", "interval", "--flood-rate", "0"))
    try:
        rc, d, stderr = finish(load(a.bin, port, 8, rate, 10), 120)
        return {"bench": "persist", "model": a.model, "rate": rate,
                "messages_sent": d.get("messages_sent"), "deliveries": d.get("deliveries"),
                "errors": d.get("errors"), "behind_schedule": d.get("behind_schedule"),
                "unsent": d.get("unsent"), "p99_us": d.get("latency_us", {}).get("p99"),
                "achieved_rate": d.get("achieved_rate"),
                "generator_cpu_pct": d.get("generator_cpu_pct"), "invalid": d.get("invalid"),
                "ok": rc == 0 and d.get("errors") == 0 and not d.get("unsent") and
                not d.get("invalid"),
                "stderr": stderr if rc else ""}
    finally:
        stop(srv)


def _us(seconds):
    return round(seconds * 1e6, 1)


def _history_fields(r):
    """The figures of one history phase, latencies in µs."""
    out = {"requests": r["sent"], "answers": r["answers"]}
    if r["lat"]:
        out.update(p50_us=_us(statistics.median(r["lat"])), p99_us=_us(pct(r["lat"], 99)),
                   max_us=_us(max(r["lat"])), messages_min=min(r["sizes"]),
                   messages_max=max(r["sizes"]))
    return out


def _load_fields(rc, d, stderr):
    keep = ("messages_sent", "deliveries", "errors", "unsent", "achieved_rate", "target_rate",
            "duration_s", "generator_cpu_pct", "generator_saturated", "behind_schedule",
            "behind_schedule_max_ms", "invalid", "first_error")
    out = {k: d.get(k) for k in keep if k in d}
    out["exit"] = rc
    out["delivery_latency_us"] = d.get("latency_us") or {}
    if rc != 0:
        out["stderr"] = stderr
    return out


def harness(a):
    """The harness's load step: idle history, live history, persist, against a.target. No
    yard-load it started outlives it, whatever happens."""
    gens = []
    try:
        return _harness(a, gens)
    finally:
        for g in gens:
            if g.poll() is None:
                g.kill()
                g.wait()


def _harness(a, gens):
    host, port = a.target.rsplit(":", 1)
    host = host.strip("[]")
    errors = []
    interval = 1.0 / a.request_rate
    n_idle = max(1, round(a.duration / 2 * a.request_rate))
    # The live requests fill three quarters of yard-load's window (it starts once its members
    # have joined, which is when the requests start too), so all of them meet live traffic.
    n_live = max(1, round(a.duration * 0.75 * a.request_rate))
    phases = {}

    c = Client(int(port), f"u{a.members}", host)
    c.send(f"JOIN {CHAN}")
    c.wait(rb" 366 \S+ " + re.escape(CHAN.encode()) + rb" ")
    c.barrier()

    idle = ask(c, n_idle, interval)
    phases["idle"] = _history_fields(idle)
    newest = idle["newest"][-1] if idle["newest"] else None
    phases["idle"]["newest_msgid"] = newest
    if idle["error"]:
        errors.append(f"idle: {idle['error']}")
    elif a.logged and newest != str(a.logged):
        errors.append(f"idle: the newest message has msgid {newest}, not {a.logged}: the log "
                      f"is not the {a.logged} generated messages")

    gen = load(a.bin, a.target, a.members, a.rate, a.duration, cpu=None)
    gens.append(gen)
    live = {"sent": 0, "answers": 0, "lat": [], "sizes": [], "newest": [], "error": None}
    if c.wait_joins("u", a.members, gen, 30):
        live = ask(c, n_live, interval, gen)
        if live["error"]:
            errors.append(f"live: {live['error']}")
        elif live["sent"] < n_live:
            errors.append(f"live: yard-load ended after {live['sent']} of {n_live} history "
                          f"requests")
    else:
        errors.append(f"live: the {a.members} members had not joined {CHAN} when yard-load "
                      f"ended or 30 s passed")
    phases["live"] = _history_fields(live)
    phases["live"]["load"] = live_load = _load_fields(*finish(gen, a.duration + 60))
    c.close()  # it would have to read the persist phase's traffic too

    gen = load(a.bin, a.target, a.persist_senders, a.persist_rate, a.duration, cpu=None)
    gens.append(gen)
    phases["persist"] = persist_load = _load_fields(*finish(gen, a.duration + 60))

    for name, ld in (("live", live_load), ("persist", persist_load)):
        if ld["exit"] != 0 or ld.get("errors"):
            errors.append(f"{name}: yard-load exit {ld['exit']}, {ld.get('errors')} error(s): "
                          f"{ld.get('first_error') or ld.get('stderr', '')}")
    for name, r in (("idle", idle), ("live", live)):
        short = [n for n in r["sizes"] if n != LIMIT]
        if short:
            errors.append(f"{name}: {len(short)} answer(s) held fewer than {LIMIT} messages "
                          f"(as few as {min(short)})")

    loads = (live_load, persist_load)
    metrics = {}
    for name in ("idle", "live"):
        for k, v in phases[name].items():
            if isinstance(v, (int, float)):
                metrics[f"history_{name}_{k}"] = v
    if isinstance(newest, str) and newest.isdigit():
        metrics["history_idle_newest_msgid"] = int(newest)
    for name, ld in (("live", live_load), ("persist", persist_load)):
        for k in ("messages_sent", "deliveries", "unsent"):
            if isinstance(ld.get(k), int):
                metrics[f"{name}_{k}"] = ld[k]
        if isinstance(ld["delivery_latency_us"].get("p99"), (int, float)):
            metrics[f"{name}_delivery_p99_us"] = ld["delivery_latency_us"]["p99"]
    # Persisted: the messages the senders sent in the window, each logged and relayed to every
    # other member (a lost one is an error above), per second of the window.
    if persist_load.get("duration_s") and isinstance(persist_load.get("messages_sent"), int):
        metrics["persisted_per_s"] = round(persist_load["messages_sent"] /
                                           persist_load["duration_s"], 1)
    cpus = [ld["generator_cpu_pct"] for ld in loads
            if isinstance(ld.get("generator_cpu_pct"), (int, float))]
    return {
        "mode": "chat-history", "target": a.target, "connections": a.members,
        "logged_messages": a.logged, "duration_s": a.duration,
        "errors": len(errors) + sum(ld.get("errors") or 0 for ld in loads),
        "first_error": errors[0] if errors else None, "problems": errors,
        "invalid": any(bool(ld.get("invalid")) for ld in loads),
        "behind_schedule": any(bool(ld.get("behind_schedule")) for ld in loads),
        "generator_saturated": any(bool(ld.get("generator_saturated")) for ld in loads),
        "generator_cpu_pct": max(cpus) if cpus else None,
        "behind_schedule_max_ms": max((ld.get("behind_schedule_max_ms") or 0.0 for ld in loads)),
        "phases": phases, "metrics": metrics,
    }


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
    h = ap.add_argument_group("harness load (--target)")
    h.add_argument("--target", help="HOST:PORT of a running chat server: run as the harness's "
                   "load step and print its JSON")
    h.add_argument("--logged", type=int, default=0,
                   help="the messages generated into the log (the newest must have this msgid)")
    h.add_argument("--members", type=int, default=64)
    h.add_argument("--duration", type=float, default=20.0,
                   help="seconds of each yard-load run; the idle phase takes half of it")
    h.add_argument("--request-rate", type=float, default=50.0, help="CHATHISTORY requests/s")
    h.add_argument("--persist-senders", type=int, default=8)
    h.add_argument("--persist-rate", type=int, default=10000)
    a = ap.parse_args()
    if a.target:
        if a.members < 2 or a.persist_senders < 2 or a.duration <= 0 or a.request_rate <= 0:
            ap.error("--members and --persist-senders must be >= 2, --duration and "
                     "--request-rate > 0")
        try:
            out = harness(a)
        except (OSError, RuntimeError) as e:
            out = {"mode": "chat-history", "target": a.target, "errors": 1,
                   "first_error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)
        return 1 if out["errors"] else 0
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
