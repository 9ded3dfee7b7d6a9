#!/usr/bin/env python3
"""Memory per idle connection: start yard-serve --app echo --model MODEL,
open N connections, have each echo one byte (so every connection has been
accepted and served), and print the server's RSS (summed over its process
group) before and after. Needs N + a few open files in this process.

usage: bench/idle_conns.py MODEL N
"""
import socket, subprocess, sys, time, os, signal
N = int(sys.argv[2]); model = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
p = subprocess.Popen([os.path.join(ROOT, "build/bin/yard-serve"),"--app","echo","--model",model,"--listen","127.0.0.1:0","--backlog","16384"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
port = int(p.stdout.readline().split(b":")[-1])
def rss():
    total = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.getpgid(int(pid)) == p.pid:
                    for l in open(f"/proc/{pid}/status"):
                        if l.startswith("VmRSS:"): total += int(l.split()[1])
            except Exception: pass
    return total
# one round trip so lazily-initialised state is in the baseline
s0 = socket.create_connection(("127.0.0.1", port)); s0.sendall(b"x"); s0.recv(1)
before = rss()
socks = []
for i in range(N):
    s = socket.socket(); s.connect(("127.0.0.1", port)); socks.append(s)
# every connection has been accepted and served once: echo one byte on each
for s in socks: s.sendall(b"y")
for s in socks:
    assert s.recv(1) == b"y"
after = rss()
print(f"{model}: {N} idle connections: server RSS {before} KiB -> {after} KiB, {(after-before)*1024/N:.0f} bytes per connection")
for s in socks: s.close()
os.killpg(p.pid, signal.SIGTERM); p.wait()
