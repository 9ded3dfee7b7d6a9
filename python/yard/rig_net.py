"""`yard rig` (rig.py): the rig's data path in user space: the relay ssh's
ProxyCommand runs in a host's namespace, and the switch that delays frames
where the kernel has no netem.

Standard library only, as rig.py (the relay imports it on every ssh connection).
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import os
import select
import socket
import sys
import time

from .rig_base import HOST_DEV, NET_NS, RigError, _run
from .rig_ns import enter_netns


# ------------------------------------------------------------------ relay ---

def relay(ns: str | None, host: str, port: int) -> int:
    """Pump stdin/stdout <-> a TCP connection to host:port made inside namespace
    ns (ssh's ProxyCommand). Ends when the remote side closes or our reader
    goes away; an end of stdin is passed on as a half-close."""
    try:
        if ns and ns != "-":
            enter_netns(ns)
        s = socket.create_connection((host, port), timeout=15)
    except (OSError, RigError) as e:
        print(f"yard rig relay: cannot reach {host}:{port} in namespace {ns}: {e}", file=sys.stderr)
        return 1
    s.settimeout(None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fin, fout = sys.stdin.fileno(), sys.stdout.fileno()
    poll = select.poll()
    poll.register(s, select.POLLIN)
    poll.register(fin, select.POLLIN)
    poll.register(fout, 0)          # only POLLERR/POLLHUP: our reader went away
    try:
        while True:
            for fd, ev in poll.poll():
                if fd == fout:
                    return 0
                if fd == s.fileno():
                    data = s.recv(65536)
                    if not data:
                        return 0
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fout, view):]
                elif fd == fin:
                    data = os.read(fin, 65536)
                    if data:
                        s.sendall(data)
                    else:
                        poll.unregister(fin)
                        s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        s.close()


# ----------------------------------------------------------------- switch ---
# Where the kernel has no netem, --delay is a switch in user space: each host's
# eth0 is a TAP device whose other end this process holds; a frame read from
# one host is written to its destination (learned by source MAC, else every
# other host) D later. One traversal is one link crossing, as with netem on a
# host's egress: a round trip between two hosts gains 2D. It runs in the
# rig's network namespace, so `down` finds and kills it like everything else.

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
SWITCH_READY = "switch ready"


def _open_tap(ns: str, dev: str) -> int:
    enter_netns(ns)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    ifr = dev.encode().ljust(16, b"\0") + (IFF_TAP | IFF_NO_PI).to_bytes(2, "little")
    fcntl.ioctl(fd, TUNSETIFF, ifr.ljust(40, b"\0"))
    os.set_blocking(fd, False)
    return fd


def switch(delay_us: int, host_namespaces: list[str]) -> int:
    ports = [_open_tap(ns, HOST_DEV) for ns in host_namespaces]
    enter_netns(NET_NS)
    print(SWITCH_READY, flush=True)
    delay = delay_us / 1e6
    where: dict[bytes, int] = {}                    # source MAC -> port
    due: list[tuple[float, int, int, bytes]] = []   # (time, seq, from port, frame)
    seq = 0
    while True:
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, src, frame = heapq.heappop(due)
            out = where.get(frame[:6])
            for fd in ([out] if out is not None and out != src else
                       [p for p in ports if p != src]):
                with contextlib.suppress(OSError):  # a full queue drops, as a link would
                    os.write(fd, frame)
        timeout = max(0.0, due[0][0] - now) if due else None
        ready, _, _ = select.select(ports, [], [], timeout)
        now = time.monotonic()
        for fd in ready:
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(frame) < 14:
                    continue
                where[frame[6:12]] = fd
                heapq.heappush(due, (now + delay, seq, fd, frame))
                seq += 1


def netem_available() -> bool:
    """Whether tc can make a netem qdisc here (probed on the rig's own loopback)."""
    p = _run(["tc", "-n", NET_NS, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"],
             check=False)
    if p.returncode != 0:
        return False
    _run(["tc", "-n", NET_NS, "qdisc", "del", "dev", "lo", "root"], check=False)
    return True
