#!/usr/bin/env python3
"""The engine's echo comparison: every model of yard-serve and the minimal
hand-written epoll server (bench/baseline), the same closed-loop yard-load
echo workload against each, server pinned to one CPU and the generator to
another, trials repeated and interleaved in random order. Prints a table of
medians and writes results/<timestamp>/echo.{json,csv} (results/latest links
to the newest run). Standard library only.

usage: bench/echo_compare.py [--trials 3] [--connections 100] [--messages 3000]
                             [--size 16] [--server-cpu 0] [--load-cpu 1]
"""

import argparse
import csv
import datetime
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("YARD_BIN", ROOT / "build" / "bin"))

def servers():
    """The hand-written baseline and every model yard-serve lists (each
    model with --procs too when it takes it), so a new model is compared
    without touching this file."""
    out = subprocess.run([BIN / "yard-serve", "--list-models", "--json"], check=True,
                         capture_output=True, text=True).stdout
    found = {"baseline": [BIN / "yard-baseline-echo", "127.0.0.1:0"]}
    for m in json.loads(out):
        argv = [BIN / "yard-serve", "--app", "echo", "--model", m["name"], "--listen",
                "127.0.0.1:0"]
        found[m["name"]] = argv
        if m["flags"]["procs"]:
            found[m["name"] + "-procs"] = argv + ["--procs"]
    return found


SERVERS = servers()


def trial(name, args):
    srv = subprocess.Popen(["taskset", "-c", str(args.server_cpu), *map(str, SERVERS[name])],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        line = srv.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"{name}: no 'listening' line (got {line!r})")
        target = line.split(" ", 1)[1]
        load = subprocess.run([str(BIN / "yard-load"), "echo", "--target", target,
                               "--connections", str(args.connections), "--messages",
                               str(args.messages), "--size", str(args.size), "--cpu",
                               str(args.load_cpu), "--json"],
                              capture_output=True, timeout=300)
        if load.returncode != 0:
            raise RuntimeError(f"{name}: yard-load failed: {load.stderr.decode().strip()}")
        return json.loads(load.stdout)
    finally:
        os.killpg(srv.pid, signal.SIGTERM)
        srv.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--messages", type=int, default=3000, help="round trips per connection")
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--results", type=Path, default=ROOT / "results")
    ap.add_argument("--only", help="comma-separated subset of " + ",".join(SERVERS))
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(SERVERS)
    order = [n for n in names for _ in range(args.trials)]
    random.shuffle(order)  # interleaved: no "all of A, then all of B"
    runs = {n: [] for n in names}
    for i, n in enumerate(order, 1):
        print(f"[{i}/{len(order)}] {n} ...", file=sys.stderr, flush=True)
        runs[n].append(trial(n, args))

    base = statistics.median(r["throughput_per_s"] for r in runs["baseline"]) \
        if "baseline" in runs else None
    rows = []
    for n in names:
        t = [r["throughput_per_s"] for r in runs[n]]
        rows.append({
            "server": n,
            "trials": len(t),
            "throughput_median": round(statistics.median(t)),
            "throughput_min": round(min(t)),
            "throughput_max": round(max(t)),
            "vs_baseline": round(statistics.median(t) / base, 3) if base else None,
            "p50_us": round(statistics.median(r["latency_us"]["p50"] for r in runs[n]), 1),
            "p99_us": round(statistics.median(r["latency_us"]["p99"] for r in runs[n]), 1),
            "p999_us": round(statistics.median(r["latency_us"]["p999"] for r in runs[n]), 1),
            "generator_cpu_pct": round(statistics.median(r["generator_cpu_pct"] for r in runs[n]), 1),
            "errors": sum(r["errors"] for r in runs[n]),
        })

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.results / stamp
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    meta = {"kernel": platform.release(), "machine": platform.machine(), "commit": commit,
            "cpus": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()}}
    (out / "echo.json").write_text(json.dumps({"meta": meta, "rows": rows, "runs": runs}, indent=1))
    with open(out / "echo.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    latest = args.results / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(stamp)

    print(f"\necho, {args.connections} connections x {args.messages} round trips x {args.size} B,"
          f" server on CPU {args.server_cpu}, yard-load on CPU {args.load_cpu},"
          f" median of {args.trials} interleaved trials (commit {commit})\n")
    print(f"{'server':16} {'round trips/s':>14} {'(min..max)':>20} {'vs baseline':>12}"
          f" {'p50 us':>9} {'p99 us':>9} {'p99.9 us':>9} {'load CPU%':>9}")
    for r in rows:
        rng = f"{r['throughput_min']}..{r['throughput_max']}"
        vs = f"{r['vs_baseline']:.3f}" if r["vs_baseline"] is not None else "-"
        print(f"{r['server']:16} {r['throughput_median']:>14} {rng:>20} {vs:>12}"
              f" {r['p50_us']:>9} {r['p99_us']:>9} {r['p999_us']:>9} {r['generator_cpu_pct']:>9}")
    print(f"\nwritten: {out}/echo.csv and echo.json")


if __name__ == "__main__":
    main()
