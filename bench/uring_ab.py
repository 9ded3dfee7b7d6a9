#!/usr/bin/env python3
"""Side by side, in one run: servers x load generators x connection counts,
server pinned to --server-cpu and yard-load to --load-cpu, trials
interleaved in random order. For issue 16 (the uring model, yard-load's
ring) and anything like it.

Servers are yard-serve models (`uring` runs with --workers 1), with extra
flags after a colon (`uring:--fixed-files off`), the Go peer (`go`), or the
hand-written epoll server of bench/baseline (`baseline`: echo, or a sink
with --sink /dev/null). Loads are `label=PATH/yard-load[:extra flags]`, so an old and a
new generator, or --io epoll and --io uring, run against the same servers.
Per cell it prints medians of: throughput, server CPU per request (us),
server CPU %, generator CPU % and its CPU seconds per 100k requests, p99.

The server's CPU is read from /proc for its whole process group (user +
system time), before and after the load.

usage: bench/uring_ab.py [--app echo|counter|rest|sink] [--servers epoll,uring]
                         [--connections 50,500] [--load label=path[:flags]]...
                         [--seconds 4] [--reps 3]
  sink: each connection sends 1 Mbit/s (yard-load rate), --flush each to
  /dev/null; the figure that matters is server CPU %.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("YARD_BIN", ROOT / "build" / "bin"))
TICK = os.sysconf("SC_CLK_TCK")


def group_cpu(pgid: int) -> float:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[2]) == pgid:  # field 5, pgrp
            total += int(f[11]) + int(f[12])
    return total / TICK


def server_argv(spec: str, app: str) -> list[str]:
    name, _, extra = spec.partition(":")
    if name == "baseline":  # the hand-written epoll server (echo, or sink to /dev/null)
        if app not in ("echo", "sink"):
            sys.exit("the baseline server is an echo server or a sink")
        return [str(BIN / "yard-baseline-echo"), "127.0.0.1:0",
                *(["--sink", "/dev/null"] if app == "sink" else [])]
    if name == "go":
        return [str(ROOT / "peers" / "go" / "run"), "--app", app, "--listen", "127.0.0.1:0"]
    argv = [str(BIN / "yard-serve"), "--app", app, "--model", name, "--listen", "127.0.0.1:0"]
    if name == "uring":
        argv += ["--workers", "1"]
    if app == "rest":
        argv += ["--bcrypt-cost", "4"]
    return argv + extra.split()


def load_argv(load: str, app: str, target: str, conns: int, seconds: float) -> list[str]:
    path, _, extra = load.partition(":")
    base = [path]
    if app == "echo":
        base += ["echo", "--size", "16"]
    elif app == "counter":
        base += ["counter"]
    elif app == "rest":
        base += ["http", "--scenario", "userinfo"]
    else:
        base += ["rate", "--bandwidth", "1Mbps"]
    return base + ["--target", target, "--connections", str(conns), "--duration",
                   f"{seconds}s", "--json"] + extra.split()


def trial(args, server: str, load: str, conns: int) -> dict:
    srv = subprocess.Popen(["taskset", "-c", str(args.server_cpu), *server_argv(server, args.app)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           start_new_session=True)
    try:
        line = srv.stdout.readline()
        if not line.startswith("listening "):
            sys.exit(f"{server}: did not start ({line!r})")
        target = line.split()[1]
        time.sleep(0.2)
        c0 = group_cpu(srv.pid)
        out = subprocess.run(["taskset", "-c", str(args.load_cpu),
                              *load_argv(load, args.app, target, conns, args.seconds)],
                             capture_output=True, text=True, timeout=args.seconds + 60)
        c1 = group_cpu(srv.pid)
    finally:
        os.killpg(srv.pid, 15)
        srv.wait(10)
    d = json.loads(out.stdout)
    n = d["messages"] or 1
    return {"tput": d["throughput_per_s"], "srv_us": (c1 - c0) / n * 1e6,
            "srv_pct": (c1 - c0) / d["duration_s"] * 100, "gen_pct": d["generator_cpu_pct"],
            "gen_100k": d["generator_cpu_s_per_100k"], "p99": d.get("latency_us", {}).get("p99"),
            "errors": d["errors"], "io": d.get("io", "epoll")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--app", default="echo", choices=["echo", "counter", "rest", "sink"])
    ap.add_argument("--servers", default="epoll,uring", help="comma-separated server specs")
    ap.add_argument("--connections", default="50,500")
    ap.add_argument("--load", action="append",
                    help="label=path[:flags]; default: build/bin/yard-load as 'yard-load'")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    args = ap.parse_args()
    loads = dict(item.split("=", 1) for item in (args.load or [f"yard-load={BIN / 'yard-load'}"]))
    servers = args.servers.split(",")
    conns = [int(c) for c in args.connections.split(",")]
    plan = [(s, l, c) for s in servers for l in loads for c in conns for _ in range(args.reps)]
    random.shuffle(plan)
    res: dict = {}
    for i, (s, l, c) in enumerate(plan, 1):
        print(f"\r[{i}/{len(plan)}] {s} {l} {c}      ", end="", file=sys.stderr, flush=True)
        res.setdefault((s, l, c), []).append(trial(args, s, loads[l], c))
    print(file=sys.stderr)
    print(f"app {args.app}, {args.seconds} s per trial, median of {args.reps}; server on CPU "
          f"{args.server_cpu}, load on CPU {args.load_cpu}")
    print(f"{'server':24} {'load':14} {'conns':>5} {'req/s':>9} {'srv us/req':>10} {'srv CPU%':>8} "
          f"{'gen CPU%':>8} {'gen s/100k':>10} {'p99 us':>9} {'errors':>6} io")
    for (s, l, c), runs in sorted(res.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        med = {k: statistics.median(r[k] for r in runs) for k in
               ("tput", "srv_us", "srv_pct", "gen_pct", "gen_100k")}
        p99 = statistics.median(r["p99"] or 0 for r in runs)
        print(f"{s:24} {l:14} {c:>5} {med['tput']:>9.0f} {med['srv_us']:>10.2f} "
              f"{med['srv_pct']:>8.1f} {med['gen_pct']:>8.1f} {med['gen_100k']:>10.4f} "
              f"{p99:>9.1f} {sum(r['errors'] for r in runs):>6} {runs[0]['io']}")


if __name__ == "__main__":
    main()
