#!/usr/bin/env python3
"""How close is yard-load to the least any load generator can cost here?

Interleaves, --reps times: yard-loopback-floor (the kernel's own cost of a
loopback round trip, both ends in one thread; half of it is one endpoint's
share, the floor under any closed-loop generator) and each yard-load given
with --load, closed loop against one server: --mode echo (16 B, --app echo),
counter (--app counter, the default read ratio) or http (--scenario
userinfo against --app rest --bcrypt-cost 4; the floor then uses 160-byte
messages, about a request's and a response's size). The server runs on
--server-cpu, everything else on --load-cpu. Prints each round, then the
medians of generator CPU seconds per 100k round trips and their ratios to
the first --load (the baseline).

usage: bench/load_floor.py [--mode echo|counter|http] [--model epoll]
                           [--connections 150] [--reps 5] [--seconds 4]
                           [--load NAME=BIN[:ARGS]] ...

Default loads: yard-load --io uring and --io epoll from $YARD_BIN (build/bin).
Standard library only.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("YARD_BIN", ROOT / "build" / "bin"))


def parse_load(spec):
    name, _, rest = spec.partition("=")
    binary, _, args = rest.partition(":")
    if not name or not binary:
        raise argparse.ArgumentTypeError(f"expected NAME=BIN[:ARGS], got {spec!r}")
    return name, binary, shlex.split(args)


def run_json(argv, what):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"load_floor: {what} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


MODES = {  # yard-serve --app and flags, yard-load's mode arguments, the floor's message size
    "echo": (["--app", "echo"], ["echo", "--size", "16"], 16),
    "counter": (["--app", "counter"], ["counter"], 16),
    "http": (["--app", "rest", "--bcrypt-cost", "4"], ["http", "--scenario", "userinfo"], 160),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("usage:")[0].strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="echo", choices=sorted(MODES),
                    help="what the generators send (default echo)")
    ap.add_argument("--model", default="epoll", help="yard-serve --model (default epoll)")
    ap.add_argument("--connections", type=int, default=150, help="default 150")
    ap.add_argument("--reps", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--seconds", type=float, default=4, help="per yard-load run (default 4)")
    ap.add_argument("--rounds", type=int, default=2000,
                    help="the floor's round trips per connection (default 2000)")
    ap.add_argument("--server-cpu", default="0", help="default 0")
    ap.add_argument("--load-cpu", default="1", help="the floor's and the loads' CPU (default 1)")
    ap.add_argument("--load", action="append", type=parse_load, metavar="NAME=BIN[:ARGS]",
                    help="a yard-load to measure, with extra arguments after a colon; "
                         "repeatable; the first is the baseline of the ratios "
                         "(default: $YARD_BIN/yard-load with --io uring, then --io epoll)")
    a = ap.parse_args()
    loads = a.load or [("uring", str(BIN / "yard-load"), ["--io", "uring"]),
                       ("epoll", str(BIN / "yard-load"), ["--io", "epoll"])]
    pin = ["taskset", "-c", a.load_cpu]
    app, mode_args, size = MODES[a.mode]
    srv = subprocess.Popen(["taskset", "-c", a.server_cpu, BIN / "yard-serve", *app,
                            "--model", a.model, "--listen", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = srv.stdout.readline()
    if not line.startswith("listening "):
        sys.exit(f"load_floor: the server did not start: {line!r}")
    target = line.split()[1]
    got = {"floor": []}
    try:
        for rep in range(a.reps):
            f = run_json([*pin, BIN / "yard-loopback-floor", "--connections",
                          str(a.connections), "--rounds", str(a.rounds), "--size", str(size),
                          "--json"], "the floor")
            got["floor"].append(f["one_end_cpu_s_per_100k"])
            cells = [f"floor {f['one_end_cpu_s_per_100k']:.3f}"]
            for name, binary, args in loads:
                d = run_json([*pin, binary, *mode_args, *args, "--target", target, "--connections",
                              str(a.connections), "--duration", f"{a.seconds}s", "--json"], name)
                got.setdefault(name, []).append(d["generator_cpu_s_per_100k"])
                cells.append(f"{name} {d['generator_cpu_s_per_100k']:.3f} "
                             f"({d['generator_cpu_pct']:.0f}% of its core, "
                             f"{d['messages'] / a.seconds / 1000:.0f}k/s)")
            print(f"round {rep + 1}: " + " | ".join(cells), flush=True)
    finally:
        srv.terminate()
        srv.wait()
    med = {k: statistics.median(v) for k, v in got.items()}
    base = loads[0][0]
    print(f"medians, CPU s per 100k round trips ({a.mode}, {a.connections} connections, "
          f"--model {a.model}):")
    for k, v in med.items():
        print(f"  {k:12} {v:.3f}  ({v / med[base]:.2f}x {base})")
    print(f"half of {base}: {med[base] / 2:.3f}; the floor is {med['floor'] / med[base]:.2f}x {base}")


if __name__ == "__main__":
    main()
