#!/usr/bin/env python3
"""Connection churn against the chat service (issue 44): --connections connections that
connect, send one bad line and close, from --threads client threads as fast as they can;
while the first quarter of them has come and gone, a real account logs in (timed until it
is welcomed, a refused attempt tried again); after the burst, SIGTERM, timed to the
server's exit. Prints one line per model: the burst's time, the most child processes the
server had at once (sampled every 50 ms), the login's time, SIGTERM's, and how many
connections whose peers had hung up were still waiting to be served at the stop (the
blocking models serve those after live ones, so they are closed unserved if the stop comes
first, as the kernel closes its accept queue).

The server runs on --server-cpu, the clients on the other CPUs. Standard library only;
every loop is bounded in count and time, and all traffic goes to 127.0.0.1.

usage: bench/chat_churn.py [--bin build/bin] [--connections 5000] [--models fork,thread,epoll]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGIN_LIMIT_S = 30.0
TERM_LIMIT_S = 30.0


def children(pid: int) -> int:
    """Processes whose parent is pid."""
    n = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                n += int(f.read().rsplit(")", 1)[1].split()[1]) == pid
        except (OSError, ValueError, IndexError):
            pass
    return n


def churn(port: int, count: int, done: list, lock: threading.Lock) -> None:
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"\x01bad\r\n")
            s.close()
        except OSError:
            pass
        with lock:
            done[0] += 1


def login(port: int) -> float:
    """Seconds until alice is welcomed (001); a refused or reset attempt is tried again."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < LOGIN_LIMIT_S:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=LOGIN_LIMIT_S) as c:
                c.sendall(b"PASS pw\r\nNICK alice\r\nUSER alice 0 * :a\r\n")
                got = b""
                while b" 001 " not in got:
                    d = c.recv(4096)
                    if not d:
                        break
                    got += d
                if b" 001 " in got:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.05)
    return float("inf")


def run(bin_dir: Path, model: str, connections: int, threads: int, server_cpu: int) -> str:
    data = tempfile.mkdtemp(prefix="yard-churn-")
    subprocess.run([str(bin_dir / "yard-chat"), "account", "add", "alice", "--data", data,
                    "--cost", "4"], input="pw\n", text=True, check=True, capture_output=True)
    errlog = open(Path(data) / "stderr", "w+")
    srv = subprocess.Popen(["taskset", "-c", str(server_cpu), str(bin_dir / "yard-serve"),
                            "--app", "chat", "--model", model, "--listen", "127.0.0.1:0",
                            "--data", data], stdout=subprocess.PIPE, stderr=errlog)
    try:
        port = int(srv.stdout.readline().split()[1].rsplit(b":", 1)[1])
        done, lock, peak, stop = [0], threading.Lock(), [0], threading.Event()

        def watch():
            while not stop.is_set():
                peak[0] = max(peak[0], children(srv.pid))
                stop.wait(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        workers = [threading.Thread(target=churn, args=(port, connections // threads, done, lock))
                   for _ in range(threads)]
        t0 = time.monotonic()
        for w in workers:
            w.start()
        while done[0] < connections // 4 and any(w.is_alive() for w in workers):
            time.sleep(0.01)
        took_login = login(port)
        for w in workers:
            w.join()
        burst = time.monotonic() - t0
        stop.set()
        watcher.join()
        s0 = time.monotonic()
        srv.terminate()
        try:
            srv.wait(TERM_LIMIT_S)
            term = f"{time.monotonic() - s0:.2f} s"
        except subprocess.TimeoutExpired:
            term = f"over {TERM_LIMIT_S:.0f} s (killed)"
        errlog.seek(0)
        unserved = re.search(r"closing (\d+) connections whose peers had hung up", errlog.read())
        return (f"{model}: {connections} connections in {burst:.2f} s; peak server children "
                f"{peak[0]}; a login during the burst {took_login:.2f} s; SIGTERM to exit "
                f"{term}; hung-up connections closed unserved at the stop: "
                f"{unserved.group(1) if unserved else 0}")
    finally:
        if srv.poll() is None:   # the whole tree: under fork the children too
            subprocess.run(["pkill", "-KILL", "-P", str(srv.pid)])
            srv.kill()
            srv.wait()
        errlog.close()
        subprocess.run(["rm", "-rf", data])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path, default=ROOT / "build" / "bin")
    ap.add_argument("--connections", type=int, default=5000, help="the burst (at most 100,000)")
    ap.add_argument("--threads", type=int, default=8, help="client threads")
    ap.add_argument("--models", default="fork,thread,epoll")
    ap.add_argument("--server-cpu", type=int, default=0)
    a = ap.parse_args()
    if not 1 <= a.connections <= 100_000 or not 1 <= a.threads <= 64:
        ap.error("--connections 1..100000, --threads 1..64")
    others = sorted(os.sched_getaffinity(0) - {a.server_cpu}) or [a.server_cpu]
    os.sched_setaffinity(0, others)
    for model in a.models.split(","):
        print(run(a.bin, model, a.connections, a.threads, a.server_cpu), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
