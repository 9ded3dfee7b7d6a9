#!/usr/bin/env python3
"""Established TLS connections during a burst of handshakes (issue 39, docs/tls.md):
does a burst stall the connections a loop already serves, and is the handshake's
private-key work better on the pool (--tls-handshake offload) or on the loop itself
(inline)?

Per model and placement, one server (CPU 0, --app echo, a TLS listener with an ECDSA
P-256 certificate) and two yard-load runs on the other CPUs: an open-loop TLS echo
(--connections x --rate msg/s, --seconds long) whose latency is the figure, and, from
a third of the way in, `yard-load handshake` making full handshakes as fast as it can
for a third of the time. The same echo run without the burst comes first, so the
report is p50/p99/max of the echo alone and with the burst, and the handshakes the
burst completed. One JSON line per run, then a table.

Standard library only (the certificates come from the harness's pki module, the openssl
command); every run is bounded in time; loopback only.

usage: bench/tls_burst.py [--bin build/bin] [--models epoll,coro,uring,reactors]
                          [--connections 50] [--rate 2000] [--seconds 6]
                          [--burst-connections 8]
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from yard.pki import pki_dir  # noqa: E402  (the harness's certificates for a run)


def start_server(bindir: Path, model: str, where: str, pki: Path) -> tuple[subprocess.Popen, str]:
    argv = ["taskset", "-c", "0", str(bindir / "yard-serve"), "--app", "echo", "--model", model,
            "--tls-listen", "127.0.0.1:0", "--tls-cert", str(pki / "ecdsa.pem"), "--tls-key",
            str(pki / "ecdsa.key"), "--tls-handshake", where]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("listening "):
        p.kill()
        raise RuntimeError(f"{model}: no listening line ({line!r})")
    return p, line.split()[1]


def load(bindir: Path, *args: str, timeout: float) -> dict:
    argv = ["taskset", "-c", "1", str(bindir / "yard-load"), *args, "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"yard-load {args[0]}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def run(a, bindir: Path, pki: Path, model: str, where: str, burst: bool) -> dict:
    srv, target = start_server(bindir, model, where, pki)
    try:
        ca = str(pki / "ca.pem")
        shots = {}

        def hammer():
            time.sleep(a.seconds / 3)
            shots["r"] = load(bindir, "handshake", "--target", target, "--tls-ca", ca,
                              "--connections", str(a.burst_connections), "--duration",
                              f"{a.seconds / 3:.2f}s", timeout=a.seconds + 30)

        t = threading.Thread(target=hammer) if burst else None
        if t:
            t.start()
        echo = load(bindir, "echo", "--target", target, "--tls-ca", ca, "--connections",
                    str(a.connections), "--rate", str(a.rate), "--duration", f"{a.seconds}s",
                    "--size", "16", timeout=a.seconds + 60)
        if t:
            t.join(a.seconds + 60)
        lat = echo["latency_us"]
        out = {"model": model, "handshake": where, "burst": burst,
               "echo_p50_us": lat["p50"], "echo_p99_us": lat["p99"], "echo_max_us": lat["max"],
               "echo_errors": echo["errors"], "echo_messages": echo["messages"]}
        if burst:
            h = shots.get("r", {})
            out["burst_handshakes"] = h.get("messages", 0)
        return out
    finally:
        srv.terminate()
        srv.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--models", default="epoll,coro,uring,reactors")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--burst-connections", type=int, default=8)
    a = ap.parse_args()
    if os.cpu_count() < 2:
        sys.exit("tls_burst: needs 2 CPUs (server on CPU 0, load on CPU 1)")
    bindir, pki = Path(a.bin).resolve(), pki_dir()
    rows = []
    for model in a.models.split(","):
        for where in ("offload", "inline"):
            for burst in (False, True):
                r = run(a, bindir, pki, model, where, burst)
                print(json.dumps(r), flush=True)
                rows.append(r)
    print(f"\n{'model':10} {'handshake':9} {'burst':5} {'p50 us':>8} {'p99 us':>9} "
          f"{'max us':>9} {'handshakes':>10}")
    for r in rows:
        print(f"{r['model']:10} {r['handshake']:9} {str(r['burst']):5} {r['echo_p50_us']:8.0f} "
              f"{r['echo_p99_us']:9.0f} {r['echo_max_us']:9.0f} "
              f"{r.get('burst_handshakes', ''):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
