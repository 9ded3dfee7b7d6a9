#!/usr/bin/env python3
"""Unfinished TLS handshakes against yard-serve (issue 39, docs/tls.md): --connections
connections each send the first half of a real ClientHello and stop. With all of them
open, a client beside them completes a TLS echo (timed); the server's memory (the sum of
VmRSS over its process group) is read before and with the crowd; then every stalled
connection must be closed by the server at --tls-handshake-timeout, and the time until
the last one is closed is reported. One JSON line per model.

The server runs on CPU 0; this script elsewhere. Standard library only (the CA and
certificate come from the openssl command); every loop is bounded in count and time, and
all traffic goes to 127.0.0.1.

usage: bench/tls_flood.py [--bin build/bin] [--connections 5000] [--timeout 3]
                          [--models epoll,thread,fork,reactors,coro,uring]
"""

import argparse
import json
import os
import resource
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from yard.pki import pki_dir  # noqa: E402  (the harness's certificates for a run)


def group_rss_kib(pgid: int) -> int:
    total = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.getpgid(int(p)) != pgid:
                continue
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return total


def client_hello_half() -> bytes:
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    return hello[:len(hello) // 2]


def one_model(args, model: str, pki: Path) -> dict:
    argv = [str(Path(args.bin) / "yard-serve"), "--app", "echo", "--model", model,
            "--tls-listen", "127.0.0.1:0", "--tls-cert", str(pki / "ecdsa.pem"),
            "--tls-key", str(pki / "ecdsa.key"), "--tls-handshake-timeout", f"{args.timeout}s"]
    srv = subprocess.Popen(["taskset", "-c", "0", *argv], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, start_new_session=True,
                           preexec_fn=lambda: resource.setrlimit(
                               resource.RLIMIT_NOFILE, (args.connections + 1000,) * 2))
    try:
        line = srv.stdout.readline().decode()
        host, _, port = line.split()[1].removeprefix("tls:").rpartition(":")
        addr = (host, int(port))
        time.sleep(0.2)
        rss_idle = group_rss_kib(srv.pid)
        half = b"" if args.silent else client_hello_half()
        socks, sel = [], selectors.DefaultSelector()
        t0 = time.monotonic()
        for _ in range(args.connections):
            s = socket.create_connection(addr, timeout=10)
            if half:
                s.sendall(half)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            socks.append(s)
        opened_s = time.monotonic() - t0
        rss_crowd = group_rss_kib(srv.pid)
        ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        t1 = time.monotonic()
        with ctx.wrap_socket(socket.create_connection(addr, timeout=10),
                             server_hostname="localhost") as c:
            c.sendall(b"beside the crowd")
            got = c.recv(64)
        served_ms = (time.monotonic() - t1) * 1000
        # Every stalled connection must be closed by the server, within the timeout + 10 s.
        open_left, deadline = len(socks), time.monotonic() + args.timeout + 10
        while open_left and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                try:
                    data = key.fileobj.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    open_left -= 1
        closed_after_s = time.monotonic() - t0
        for s in socks:
            s.close()
        return {"model": model, "connections": args.connections, "opened_s": round(opened_s, 2),
                "rss_idle_kib": rss_idle, "rss_crowd_kib": rss_crowd,
                "kib_per_stalled_conn": round((rss_crowd - rss_idle) / args.connections, 2),
                "served_beside_ms": round(served_ms, 1), "echo_ok": got == b"beside the crowd",
                "left_open": open_left, "all_closed_after_s": round(closed_after_s, 2)}
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(srv.pid, signal.SIGKILL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--timeout", type=int, default=3, help="--tls-handshake-timeout, seconds")
    ap.add_argument("--models", default="epoll,thread,fork,reactors,coro,uring")
    ap.add_argument("--silent", action="store_true",
                    help="the connections send nothing at all (not half a ClientHello)")
    args = ap.parse_args()
    if not 1 <= args.connections <= 20000:
        ap.error("--connections: 1 to 20000")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.connections + 1000
    if hard < want:
        ap.error(f"the descriptor limit ({hard}) is below {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    pki = pki_dir()
    for m in args.models.split(","):
        print(json.dumps(one_model(args, m, pki)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
