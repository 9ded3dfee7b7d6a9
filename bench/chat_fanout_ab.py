#!/usr/bin/env python3
"""Chat fan-out, two builds side by side: 64 members of one channel, 1000 messages/s in
total (the chat experiment's load), yard-load chat (of NEW) on CPU 1 against
bench/chat_serve on CPU 0, builds and models interleaved in every repetition. Prints each
trial (delivery p50 and p99 in µs, errors) and then the medians and the p99 range.

  usage: OLD=/tmp/old/build/bin NEW=build/bin bench/chat_fanout_ab.py [REPS] [MODELS]
         (REPS 3, MODELS epoll,reactors by default)
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys


def trial(bindir, new, model):
    p = subprocess.Popen(["taskset", "-c", "0", "bench/chat_serve", bindir, "64", "--model",
                          model, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    port = re.search(r":(\d+)$", p.stdout.readline().decode().strip()).group(1)
    r = subprocess.run(["taskset", "-c", "1", f"{new}/yard-load", "chat", "--target",
                        f"127.0.0.1:{port}", "--connections", "64", "--rate", "1000",
                        "--duration", "5s", "--json"], capture_output=True, text=True)
    p.send_signal(signal.SIGTERM)
    p.wait(20)
    d = json.loads(r.stdout)
    return d["latency_us"]["p50"], d["latency_us"]["p99"], d["errors"]


def main():
    old, new = os.environ.get("OLD", "/tmp/old/build/bin"), os.environ.get("NEW", "build/bin")
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    models = sys.argv[2].split(",") if len(sys.argv) > 2 else ["epoll", "reactors"]
    res = {}
    for rep in range(reps):
        for label, bindir in (("old", old), ("new", new)):
            for model in models:
                p50, p99, errors = trial(bindir, new, model)
                res.setdefault(f"{label}-{model}", []).append((p50, p99))
                print(f"{label}-{model} {rep} p50 {p50:.0f} p99 {p99:.0f} errors {errors}",
                      flush=True)
    for k, v in res.items():
        p99s = [x[1] for x in v]
        print(f"{k} median p50 {statistics.median(x[0] for x in v):.0f} p99 "
              f"{statistics.median(p99s):.0f} p99 range {min(p99s):.0f}..{max(p99s):.0f}")


if __name__ == "__main__":
    main()
