#!/usr/bin/env python3
"""Established TLS connections during a burst of handshakes (issue 39, docs/tls.md):
does a burst stall the connections a loop already serves, and is the handshake's
private-key work better on the pool (--tls-handshake offload) or on the loop itself
(inline)?

The measurement: an open-loop TLS echo (--connections x --rate msg/s, --seconds long,
16 B) whose latency is the figure, and, with the burst on, `yard-load handshake` making
full handshakes for the middle third of the time: at --handshake-rate a second (open
loop), or as fast as --burst-connections in flight allow (closed loop) when no rate is
given. The echo alone is the same run with the burst off.

Two ways to run it:

  the harness's load step (experiments/tls_burst.toml): --target tls:HOST:PORT --tls-ca
    FILE --burst on|off; the server is the harness's, and one JSON object goes to stdout:
    the echo's own yard-load JSON (latency, throughput, errors) with generator_cpu_pct
    the two generators' CPU together, and a "metrics" object (burst_handshakes,
    burst_handshakes_per_s, burst_failures);
  standalone (no --target): per model and placement, its own server (CPU 0, --app echo,
    an ECDSA P-256 certificate from the harness's pki module) and the load on CPU 1, the
    echo alone then with the burst; one JSON line per run, then a table.

Standard library only; every run is bounded in time; loopback only.

usage: bench/tls_burst.py [--bin build/bin] [--models epoll,coro,uring,reactors]
                          [--connections 50] [--rate 2000] [--seconds 6]
                          [--burst-connections 8] [--handshake-rate R]
       bench/tls_burst.py --target tls:HOST:PORT --tls-ca FILE --burst on|off [same options]
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


def load(bindir: Path, pin: list, *args: str, timeout: float) -> dict:
    argv = [*pin, str(bindir / "yard-load"), *args, "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"yard-load {args[0]}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def measure(a, bindir: Path, target: str, ca: str, burst: bool, pin: list) -> dict:
    """The echo run, with the burst in its middle third when burst: (echo JSON, burst JSON
    or None)."""
    shots = {}

    def hammer():
        time.sleep(a.seconds / 3)
        pace = (["--rate", str(a.handshake_rate), "--connections", str(a.burst_connections)]
                if a.handshake_rate else ["--connections", str(a.burst_connections)])
        shots["r"] = load(bindir, pin, "handshake", "--target", target, "--tls-ca", ca,
                          *pace, "--duration", f"{a.seconds / 3:.2f}s",
                          timeout=a.seconds + 30)

    t = threading.Thread(target=hammer) if burst else None
    if t:
        t.start()
    echo = load(bindir, pin, "echo", "--target", target, "--tls-ca", ca, "--connections",
                str(a.connections), "--rate", str(a.rate), "--duration", f"{a.seconds}s",
                "--size", "16", timeout=a.seconds + 60)
    if t:
        t.join(a.seconds + 60)
        if "r" not in shots:
            raise RuntimeError("the handshake burst did not finish")
    return echo, shots.get("r")


def harness_step(a, bindir: Path) -> int:
    """The load step of experiments/tls_burst.toml: one JSON object on stdout."""
    echo, hs = measure(a, bindir, a.target, a.tls_ca, a.burst == "on", pin=[])
    out = dict(echo)
    n = hs["messages"] if hs else 0
    out["metrics"] = {"burst_handshakes": n,
                      "burst_handshakes_per_s": n / (a.seconds / 3) if hs else 0.0,
                      "burst_failures": (hs.get("tls") or {}).get("failures", 0) if hs else 0}
    if hs and isinstance(echo.get("generator_cpu_pct"), (int, float)) \
            and isinstance(hs.get("generator_cpu_pct"), (int, float)):
        # Both generators share the load CPU; the burst's ran a third of the time.
        out["generator_cpu_pct"] = echo["generator_cpu_pct"] + hs["generator_cpu_pct"] / 3
    print(json.dumps(out))
    return 0 if echo.get("errors", 0) == 0 and out["metrics"]["burst_failures"] == 0 else 1


def run(a, bindir: Path, pki: Path, model: str, where: str, burst: bool) -> dict:
    srv, target = start_server(bindir, model, where, pki)
    try:
        echo, hs = measure(a, bindir, target, str(pki / "ca.pem"), burst, ["taskset", "-c", "1"])
        lat = echo["latency_us"]
        out = {"model": model, "handshake": where, "burst": burst,
               "echo_p50_us": lat["p50"], "echo_p99_us": lat["p99"], "echo_max_us": lat["max"],
               "echo_errors": echo["errors"], "echo_messages": echo["messages"]}
        if burst:
            out["burst_handshakes"] = hs.get("messages", 0)
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
    ap.add_argument("--handshake-rate", type=int, default=0,
                    help="full handshakes a second during the burst (open loop); 0: as fast "
                         "as --burst-connections allow")
    ap.add_argument("--target", help="the harness's server (tls:HOST:PORT): run as its load step")
    ap.add_argument("--tls-ca", help="with --target: the CA that signed the server's certificate")
    ap.add_argument("--burst", choices=["on", "off"], default="on",
                    help="with --target: the handshakes on or off")
    a = ap.parse_args()
    if a.seconds <= 0 or a.connections < 1 or a.rate < 1 or a.burst_connections < 1 \
            or a.handshake_rate < 0:
        ap.error("--seconds, --connections, --rate and --burst-connections must be positive")
    bindir = Path(a.bin).resolve()
    if a.target:
        if not a.tls_ca:
            ap.error("--target needs --tls-ca")
        return harness_step(a, bindir)
    if os.cpu_count() < 2:
        sys.exit("tls_burst: needs 2 CPUs (server on CPU 0, load on CPU 1)")
    pki = pki_dir()
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
