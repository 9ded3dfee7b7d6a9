#!/usr/bin/env python3
"""Is yard-load ever the bottleneck? Its achieved throughput and CPU against
other clients on the same server, one core each (server on --server-cpu,
client on --load-cpu):

- echo, 100 connections, closed loop: yard-load echo vs the thread-per-
  connection blocking client (tools/load/blocking_client.c);
- HTTP GET / on the rest app, 100 connections, closed loop: yard-load http
  vs wrk (when installed).

Each pair runs --trials times, interleaved; prints medians of throughput and
of client CPU seconds per 100k round trips (from the child's rusage).
Standard library only.

usage: bench/load_compare.py [--trials 3] [--seconds 5] [--model epoll]
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("YARD_BIN", ROOT / "build" / "bin"))


def start_server(app, model, cpu, *flags):
    p = subprocess.Popen(["taskset", "-c", str(cpu), BIN / "yard-serve", "--app", app, "--model",
                          model, "--listen", "127.0.0.1:0", *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    if not line.startswith("listening "):
        sys.exit(f"server did not start: {line!r}")
    return p, line.split()[1]


def timed(argv):
    """Run argv; return (stdout, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


def yard_echo(target, cpu, conns, secs):
    out, c = timed(["taskset", "-c", str(cpu), BIN / "yard-load", "echo", "--target", target,
                    "--connections", str(conns), "--duration", f"{secs}s", "--json"])
    d = json.loads(out)
    return d["throughput_per_s"], d["messages"], c


def blocking_echo(target, cpu, conns, secs, rate_hint):
    # The blocking client takes a message count: size it from yard-load's rate for ~secs.
    per = max(1000, int(rate_hint * secs / conns))
    out, c = timed(["taskset", "-c", str(cpu), BIN / "yard-blocking-client", target, str(conns),
                    str(per), "16"])
    d = json.loads(out)
    if d["failures"]:
        sys.exit(f"the blocking client failed: {out!r}")
    return d["throughput_per_s"], per * conns, c


def yard_http(target, cpu, conns, secs):
    out, c = timed(["taskset", "-c", str(cpu), BIN / "yard-load", "http", "--target", target,
                    "--users", str(conns), "--duration", f"{secs}s", "--json"])
    d = json.loads(out)
    return d["throughput_per_s"], d["messages"], c


def wrk_http(target, cpu, conns, secs):
    out, c = timed(["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conns}", f"-d{secs}s",
                    f"http://{target}/"])
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    return rps, total, c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--model", default="epoll")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    a = ap.parse_args()
    rows = {}
    for t in range(a.trials):
        srv, target = start_server("echo", a.model, a.server_cpu)
        try:
            y = yard_echo(target, a.load_cpu, a.connections, a.seconds)
            b = blocking_echo(target, a.load_cpu, a.connections, a.seconds, y[0])
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait()
        rows.setdefault("echo: yard-load", []).append(y)
        rows.setdefault("echo: blocking thread-per-connection", []).append(b)
        srv, target = start_server("rest", a.model, a.server_cpu)
        try:
            rows.setdefault("http GET /: yard-load", []).append(
                yard_http(target, a.load_cpu, a.connections, a.seconds))
            if shutil.which("wrk"):
                rows.setdefault("http GET /: wrk -t1", []).append(
                    wrk_http(target, a.load_cpu, a.connections, a.seconds))
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait()
    print(f"server: yard-serve --model {a.model} on CPU {a.server_cpu}; clients on CPU "
          f"{a.load_cpu}; {a.connections} connections, closed loop; medians of {a.trials}")
    print(f"{'client':42} {'round trips/s':>14} {'client CPU s / 100k':>20}")
    for name, vals in rows.items():
        tput = statistics.median(v[0] for v in vals)
        cpu = statistics.median(v[2] * 1e5 / v[1] for v in vals)
        print(f"{name:42} {tput:14.0f} {cpu:20.3f}")


if __name__ == "__main__":
    main()
