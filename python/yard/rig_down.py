"""`yard rig down` (rig.py): every process of the rig killed (with a grace
period), its namespaces and state removed, whether `up` finished or not.

Standard library only, as rig.py (the relay imports it on every ssh connection).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

from .cgroup import sweep_orphans
from .rig_base import (
    DEFAULT_STATE_DIR, KILL_GRACE_SECS, KILL_WAIT_SECS, RigError, _lock, _require_root, _run,
    _signals
)
from .rig_ns import _alive, _cmdline, _rig_sshd_pids, list_netns, netns_pids, rig_namespaces
from .rig_hosts import load_state


# ------------------------------------------------------------------ down ---

def _kill_all(collect, grace: float = KILL_GRACE_SECS, wait: float = KILL_WAIT_SECS) -> list[int]:
    """SIGTERM every pid collect() returns (it is asked again each round, so
    processes started meanwhile are caught), SIGKILL after grace seconds;
    returns every pid signalled. Raises RigError if any survives."""
    start = time.monotonic()
    termed: set[int] = set()
    killed: set[int] = set()
    while True:
        pids = [p for p in collect() if p != os.getpid() and _alive(p)]
        if not pids:
            return sorted(termed | killed)
        now = time.monotonic() - start
        if now > grace + wait:
            raise RigError("processes still running after SIGKILL: " +
                           ", ".join(f"{p} ({_cmdline(p)[:60]})" for p in pids))
        for p in pids:
            sig = signal.SIGKILL if now > grace else signal.SIGTERM
            if (p in killed) if sig == signal.SIGKILL else (p in termed):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
            (killed if sig == signal.SIGKILL else termed).add(p)
            # Our own children (a test calling up() in-process) must be reaped.
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(p, os.WNOHANG)
        time.sleep(0.02)


def _teardown(st: dict, state_dir: Path, scan: bool, remove_dir: bool = True) -> list[str]:
    """Kill what runs in the rig, delete its namespaces (links, bridge and
    qdiscs go with them) and its state dir. scan: also the yard-rig-*
    namespaces and rig sshds the state does not name."""
    removed = []
    namespaces = list(dict.fromkeys(st.get("namespaces") or []))
    if scan:
        namespaces += [n for n in rig_namespaces() if n not in namespaces]
    present = set(list_netns())
    namespaces = [n for n in namespaces if n in present]

    def collect():
        pids = set()
        for h in st.get("hosts") or []:
            p = h.get("sshd_pid")
            if isinstance(p, int) and f"{state_dir}/sshd/" in _cmdline(p):
                pids.add(p)
        for ns in namespaces:
            pids.update(netns_pids(ns))
        if scan or st.get("hosts"):
            pids.update(_rig_sshd_pids(state_dir))
        return pids

    pids = _kill_all(collect)
    if pids:
        removed.append(f"{len(pids)} process(es) ({', '.join(map(str, pids))})")
    errors = []
    for ns in namespaces:
        p = _run(["ip", "netns", "del", ns], check=False)
        if p.returncode != 0:
            errors.append(f"ip netns del {ns}: {p.stderr.strip()}")
    left = [n for n in namespaces if n in set(list_netns())]
    if left:
        errors.append(f"namespaces remain: {', '.join(left)}")
    gone = [n for n in namespaces if n not in left]
    if gone:
        removed.append(f"namespaces {', '.join(gone)} (with their bridge, veth links and qdiscs)")
    # The agents just killed could not remove their servers' cgroups.
    groups = sweep_orphans()
    if groups:
        removed.append(f"cgroups {', '.join(groups)}")
    if remove_dir and state_dir.exists():
        shutil.rmtree(state_dir)
        removed.append(f"state dir {state_dir} (key pair, host keys, hosts file)")
    if errors:
        raise RigError("; ".join(errors))
    return removed


def down(state_dir: Path | str = DEFAULT_STATE_DIR) -> list[str]:
    """Take the rig down; returns what was removed (empty: there was nothing).
    Works from a missing or partial state file (finds yard-rig-* namespaces)."""
    state_dir = Path(state_dir).absolute()
    _require_root()
    with _lock(), _signals(signal.SIG_IGN):
        return _teardown(load_state(state_dir) or {}, state_dir, scan=True)
