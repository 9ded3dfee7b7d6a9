"""`yard rig` (rig.py): network namespaces: the rig's, the processes in
them, the addresses that would conflict with the rig's, and entering one.

Standard library only, as rig.py (the relay imports it on every ssh connection).
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import shutil
from pathlib import Path

from .rig_base import CLONE_NEWNET, PREFIX, RIG_NET, RigError, _run


# ------------------------------------------------------------ namespaces ---

def list_netns() -> list[str]:
    p = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def rig_namespaces() -> list[str]:
    return sorted(n for n in list_netns() if n.startswith(PREFIX))


def netns_pids(ns: str) -> list[int]:
    p = _run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in p.stdout.split() if x.isdigit()]


def _alive(pid: int) -> bool:
    """Running (a zombie is dead: it holds no namespace and runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _rig_sshd_pids(state_dir: Path) -> list[int]:
    """sshd processes started with a config under this state dir, wherever they are."""
    marker = f"{state_dir}/sshd/"
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            c = _cmdline(int(d))
            if "sshd" in c.split(" ", 1)[0] and marker in c and _alive(int(d)):
                out.append(int(d))
    return out


def _prefix_for(ns: str | None) -> list[str]:
    return ["ip", "-n", ns] if ns else ["ip"]


def _addresses_in(prefix: list[str]) -> list[dict]:
    """IPv4 addresses: [{dev, address, prefixlen}] via `ip ... -4 -j addr`."""
    p = _run(prefix + ["-4", "-j", "addr", "show"], check=False)
    out = []
    try:
        links = json.loads(p.stdout or "[]")
    except ValueError:
        return out
    for link in links:
        for ai in link.get("addr_info", []):
            if ai.get("local"):
                out.append({"dev": link.get("ifname", "?"), "address": ai["local"],
                            "prefixlen": ai.get("prefixlen", 32), "peer": ai.get("address")})
    return out


def _conflicts_in(prefix: list[str]) -> list[str]:
    """Addresses in, and routes to prefixes within, 198.18.0.0/15."""
    found = []
    for a in _addresses_in(prefix):
        for addr in filter(None, (a["address"], a["peer"])):
            net = ipaddress.ip_network(f"{addr}/{a['prefixlen']}", strict=False)
            if ipaddress.ip_address(addr) in RIG_NET or (net.prefixlen >= 15 and net.overlaps(RIG_NET)):
                found.append(f"address {addr}/{a['prefixlen']} on {a['dev']}")
                break
    p = _run(prefix + ["-4", "-j", "route", "show", "table", "all"], check=False)
    try:
        routes = json.loads(p.stdout or "[]")
    except ValueError:
        routes = []
    for r in routes:
        dst = r.get("dst")
        if not dst or dst == "default":
            continue
        try:
            net = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if net.version != 4 or net.prefixlen < 15 or not net.overlaps(RIG_NET):
            continue
        # The local table's entries for an address already named add nothing.
        if found and r.get("table") == "local":
            continue
        where = f" table {r['table']}" if r.get("table") else ""
        found.append(f"route {r.get('type', 'unicast')} {dst}{where} dev {r.get('dev', '?')}")
    return found


def find_conflicts() -> list[str]:
    """Everything of 198.18.0.0/15 in use: in this (root) namespace, in every named
    namespace, and in the unnamed namespaces of running processes (containers)."""
    out = [f"root namespace: {c}" for c in _conflicts_in(["ip"])]
    seen = {_ns_inode("/proc/self/ns/net")}
    for ns in list_netns():
        ino = _ns_inode(f"/run/netns/{ns}")
        if ino in seen:
            continue
        seen.add(ino)
        out += [f"namespace {ns}: {c}" for c in _conflicts_in(["ip", "-n", ns])]
    nsenter = shutil.which("nsenter")
    for d in sorted(os.listdir("/proc"), key=lambda s: (len(s), s)):
        if not d.isdigit():
            continue
        ino = _ns_inode(f"/proc/{d}/ns/net")
        if ino is None or ino in seen or not nsenter:
            continue
        seen.add(ino)
        try:
            comm = Path(f"/proc/{d}/comm").read_text().strip()
        except OSError:
            comm = "?"
        pre = [nsenter, f"--net=/proc/{d}/ns/net", "--", "ip"]
        out += [f"the namespace of pid {d} ({comm}): {c}" for c in _conflicts_in(pre)]
    return out


def enter_netns(ns: str) -> None:
    """Move this (single-threaded) process into the named network namespace."""
    if "/" in ns or ns in ("", ".", ".."):
        raise RigError(f"bad namespace name {ns!r}")
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns into {ns}: {os.strerror(e)}")
    finally:
        os.close(fd)
