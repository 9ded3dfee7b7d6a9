"""A server under measurement: what every trial does with its server, locally or on a server host.

Started pinned, in a fresh cgroup, ready when it prints `listening HOST:PORT`; sampled while the
load runs; stopped with SIGTERM (SIGKILL after STOP_TIMEOUT); its exit status, rusage, stderr tail
and anything left in its cgroup recorded. Standard library only: the agent (yard/agent.py) runs
this module on remote hosts, where only python3 is assumed.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import time
from typing import Callable

from .cgroup import GroupProc, make_group
from .sampler import Sampler

READY_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


def die_with_parent() -> None:
    """In a child: the kernel SIGKILLs it when its parent dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def pinned(cpus: set[int], attach: Callable[[], None] | None = None, orphan_dies: bool = False):
    def pre() -> None:
        if attach:
            attach()
        if orphan_dies:
            die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)
    return pre


def read_line(proc: subprocess.Popen, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        if chunk == b"\n":
            return buf.decode(errors="replace")
        buf += chunk
    return None


def wait_pid(pid: int, timeout: float):
    """wait4 with a timeout: (status, rusage), or (None, None) if it did not exit in time."""
    deadline = time.monotonic() + timeout
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return status, ru
        if time.monotonic() > deadline:
            return None, None
        time.sleep(0.01)


def listening_addresses(line: str) -> tuple[list[str], list[str]]:
    """The plain and the TLS "HOST:PORT" addresses of yard-serve's first line,
    "listening 127.0.0.1:7000 tls:127.0.0.1:7001" (docs/tls.md)."""
    plain, tls = [], []
    for a in line.split()[1:]:
        (tls if a.startswith("tls:") else plain).append(a.removeprefix("tls:"))
    return plain, tls


class MeasuredServer:
    def __init__(self, argv: list[str], cpus: set[int], name: str, sample_interval: float,
                 cwd: str | None = None, orphan_dies: bool = False):
        self.argv, self.cpus, self.cwd = argv, cpus, cwd
        self.orphan_dies = orphan_dies
        self.interval = sample_interval
        self.group = make_group(name)
        self.proc: subprocess.Popen | None = None
        self.sampler: Sampler | None = None
        self.problems: list[str] = []
        self.out: dict = {"cgroup": self.group.describe()}

    def start(self) -> str | None:
        """The HOST:PORT it listens on, or None (the reason in problems)."""
        try:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         cwd=self.cwd, preexec_fn=pinned(
                                             self.cpus, self.group.attach_self, self.orphan_dies))
        except OSError as e:
            self.problems.append(f"server did not start: {e}")
            return None
        if isinstance(self.group, GroupProc):
            self.group.set_root(self.proc.pid)
        line = read_line(self.proc, READY_TIMEOUT)
        if not line or not line.startswith("listening "):
            self.problems.append(f"server did not print 'listening HOST:PORT' within "
                                 f"{READY_TIMEOUT} s (got {line!r})")
            return None
        plain, tls = listening_addresses(line)
        # A TLS-only server's target keeps its "tls:" (yard-load then speaks TLS).
        return plain[0] if plain else "tls:" + tls[0]

    def begin_sampling(self) -> None:
        self.sampler = Sampler(self.group, self.interval)
        self.sampler.start()

    def end_sampling(self) -> None:
        if self.sampler is None:
            return
        self.out["totals"] = self.sampler.stop()
        self.out["samples"] = self.sampler.samples
        self.sampler = None

    def stop(self) -> dict:
        """Stop it (if it runs) and return everything measured: cgroup, samples, totals,
        rusage (voluntary/involuntary switches of it and its reaped children), server_exit,
        server_stderr, problems."""
        self.end_sampling()
        proc, ru = self.proc, None
        if proc is not None:
            # wait4 rather than proc.poll(): poll would reap a server that already exited and
            # lose its rusage (and the wait below would then find no child).
            status, ru = wait_pid(proc.pid, 0)
            if status is None:
                proc.send_signal(signal.SIGTERM)
                status, ru = wait_pid(proc.pid, STOP_TIMEOUT)
            else:
                self.problems.append("server exited before it was asked to stop")
            if status is None:
                self.problems.append(f"server did not exit within {STOP_TIMEOUT} s of SIGTERM")
                proc.kill()
                status, ru = wait_pid(proc.pid, STOP_TIMEOUT)
            code = os.waitstatus_to_exitcode(status) if status is not None else None
            proc.returncode = code
            try:
                self.out["server_stderr"] = proc.stderr.read().decode(errors="replace")[-2000:]
            except (OSError, ValueError):
                pass
            self.out["server_exit"] = code
            if code not in (0, None):
                self.problems.append(f"server exited with {code}")
            self.proc = None
        if ru is not None:
            self.out["rusage"] = {"nvcsw": ru.ru_nvcsw, "nivcsw": ru.ru_nivcsw}
        leftover = self.group.pids()
        if leftover:
            self.problems.append(f"{len(leftover)} process(es) left in the cgroup after exit")
            self.group.kill_all()
        try:
            self.group.cleanup()
        except OSError as e:
            self.problems.append(f"cgroup cleanup: {e}")
        self.out["problems"] = self.problems
        return self.out
