"""Periodic sampling of a cgroup: CPU% (100% = one core), context switches, memory, task count."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from .cgroup import Group


def ctx_switches(pids: list[int]) -> tuple[int, int]:
    """Voluntary and involuntary switches summed over every live thread of `pids`."""
    vol = invol = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol += int(line.split()[1])
    return vol, invol


def pss_bytes(pids: list[int]) -> int | None:
    """Proportional set size summed over the tree (smaps_rollup); None when unreadable."""
    total, seen = 0, False
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                seen = True
                break
    return total if seen else None


def read_syscalls(pids: list[int]) -> int | None:
    """read(2)-family system calls (`syscr` of /proc/PID/io) summed over `pids`; None when none
    is readable. A process's count includes its exited threads and the children it reaped, so
    the difference of two sums over a cgroup's processes counts the reads made in between by
    every process that was alive at the end or was reaped by one that was. (io_uring's reads
    are not system calls and are not counted; nor are recv/recvmsg, which yard-serve and the
    peers do not use for the sink.)"""
    total, seen = 0, False
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/io").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("syscr:"):
                total += int(line.split()[1])
                seen = True
                break
    return total if seen or not pids else None  # an empty group has made no reads


class Sampler:
    """Samples `group` every `interval` seconds in a background thread until stop()."""

    def __init__(self, group: Group, interval: float = 0.5, pss_every: int = 8):
        self.group = group
        self.interval = interval
        self.pss_every = max(1, pss_every)
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = 0.0
        self.cpu0 = 0
        self.syscr0: int | None = None

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.cpu0 = self.group.cpu_ns()
        self.syscr0 = read_syscalls(self.group.pids())
        self._thread.start()

    def _take(self, i: int, prev: tuple[float, int]) -> tuple[float, int]:
        now = time.monotonic()
        cpu = self.group.cpu_ns()
        pids = self.group.pids()
        vol, invol = ctx_switches(pids)
        dt = now - prev[0]
        s = {
            "t": round(now - self.t0, 4),
            "cpu_ns": cpu - self.cpu0,
            "cpu_pct": 100.0 * (cpu - prev[1]) / 1e9 / dt if dt > 0 else 0.0,
            "ctx_vol_live": vol,
            "ctx_invol_live": invol,
            "mem_bytes": self.group.memory_bytes(),
            "tasks": self.group.task_count(),
            "procs": len(pids),
        }
        if self.syscr0 is not None:
            syscr = read_syscalls(pids)
            if syscr is not None:
                s["read_syscalls"] = syscr - self.syscr0
        if i % self.pss_every == 0:
            s["pss_bytes"] = pss_bytes(pids)
        self.samples.append(s)
        return now, cpu

    def _run(self) -> None:
        prev = (self.t0, self.cpu0)
        i = 0
        # Sleep to absolute deadlines so the series does not drift by the sampling cost.
        next_t = self.t0 + self.interval
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            try:
                prev = self._take(i, prev)
            except OSError:
                pass
            i += 1
            next_t += self.interval

    def stop(self) -> dict:
        """Stop sampling; return totals over the whole window (including a final partial one)."""
        self._stop.set()
        self._thread.join()
        end = time.monotonic()
        cpu = self.group.cpu_ns()
        pids = self.group.pids()
        # The read count of the group is the sum over its processes, and a process that has
        # exited but is not yet reaped has left the group with its count (its parent gets it
        # when it reaps it): at the end of a run, when connections close and the fork model's
        # children exit, the sum dips. So the count is taken at its highest sample, with the
        # time of that sample: a rate over the part of the window before the dips.
        syscr = read_syscalls(pids)
        marks = [(x["read_syscalls"], x["t"]) for x in self.samples if "read_syscalls" in x]
        if syscr is not None and self.syscr0 is not None:
            marks.append((syscr - self.syscr0, end - self.t0))
        best = max(marks, default=None)
        return {
            "wall_s": end - self.t0,
            "cpu_s": (cpu - self.cpu0) / 1e9,
            "read_syscalls": best[0] if best else None,
            "read_syscalls_s": best[1] if best else None,
            "pss_bytes_end": pss_bytes(pids),
            "mem_peak_bytes": self.group.memory_peak_bytes(),
        }
