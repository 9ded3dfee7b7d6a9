"""A cgroup per server: exact CPU time and memory of a whole process tree.

Three backends, chosen once per run by `make_group`:
  * v2  — pure unified hierarchy (/sys/fs/cgroup/cgroup.controllers exists): cpu.stat usage_usec,
          memory.current, cgroup.threads.
  * v1  — cpuacct + memory (+ pids) controllers of a v1/hybrid hierarchy: cpuacct.usage (ns),
          memory.usage_in_bytes, tasks.
  * proc — no cgroup could be made: the harness becomes a child subreaper and walks /proc for the
          descendants of the server. CPU of descendants that exit between two samples is only
          seen once they are reaped (cutime/cstime of their reaper), so this is reported as
          approximate in the results.
The cgroup's counters are monotonic and include every task that ever lived in the group, so a
child that lives shorter than one sample interval is still counted in full.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import time
from pathlib import Path

CG_ROOT = Path("/sys/fs/cgroup")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Every group the harness makes is named yard-<pid of its maker>-<tag>, so that a group whose
# maker died without removing it (an agent killed by SIGKILL) can be found and removed.
OWNED_NAME = re.compile(r"^yard-(\d+)-")
V1_CONTROLLERS = ("cpuacct", "memory", "pids")


def _read(path: Path) -> str:
    return path.read_text()


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Group:
    """Common interface. `kind` is 'v2', 'v1' or 'proc'; `exact` tells whether CPU is exact."""

    kind = "none"
    exact = True

    def attach_self(self) -> None:  # called in the child between fork and exec
        raise NotImplementedError

    def cpu_ns(self) -> int:
        raise NotImplementedError

    def memory_bytes(self) -> int | None:
        return None

    def memory_peak_bytes(self) -> int | None:
        return None

    def pids(self) -> list[int]:
        raise NotImplementedError

    def task_count(self) -> int:
        n = 0
        for pid in self.pids():
            try:
                n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
        return n

    def kill_all(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def cleanup(self) -> None:
        pass

    def describe(self) -> dict:
        return {"kind": self.kind, "exact_cpu": self.exact}


def _rmdir_retry(path: Path, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class GroupV2(Group):
    kind = "v2"

    def __init__(self, name: str, root: Path = CG_ROOT):
        self.path = root / name
        self.path.mkdir()
        ctl = _read(root / "cgroup.subtree_control").split()
        self.has_memory = "memory" in ctl

    def attach_self(self) -> None:
        (self.path / "cgroup.procs").write_text("0")

    def cpu_ns(self) -> int:
        for line in _read(self.path / "cpu.stat").splitlines():
            k, v = line.split()
            if k == "usage_usec":
                return int(v) * 1000
        raise OSError("cpu.stat has no usage_usec")

    def memory_bytes(self) -> int | None:
        return _read_int(self.path / "memory.current") if self.has_memory else None

    def memory_peak_bytes(self) -> int | None:
        return _read_int(self.path / "memory.peak") if self.has_memory else None

    def pids(self) -> list[int]:
        return [int(x) for x in _read(self.path / "cgroup.procs").split()]

    def task_count(self) -> int:
        return len(_read(self.path / "cgroup.threads").split())

    def cleanup(self) -> None:
        self.kill_all()
        _rmdir_retry(self.path)

    def describe(self) -> dict:
        return {"kind": self.kind, "exact_cpu": True, "path": str(self.path),
                "memory": "memory.current" if self.has_memory else None}


class GroupV1(Group):
    kind = "v1"

    def __init__(self, name: str, root: Path = CG_ROOT):
        self.cpu = root / "cpuacct" / name
        self.cpu.mkdir()
        self.dirs = [self.cpu]
        self.mem = None
        for ctl in ("memory", "pids"):
            d = root / ctl
            if d.is_dir():
                try:
                    (d / name).mkdir()
                    self.dirs.append(d / name)
                    if ctl == "memory":
                        self.mem = d / name
                except OSError:
                    pass

    def attach_self(self) -> None:
        for d in self.dirs:
            (d / "cgroup.procs").write_text("0")

    def cpu_ns(self) -> int:
        return int(_read(self.cpu / "cpuacct.usage"))

    def memory_bytes(self) -> int | None:
        return _read_int(self.mem / "memory.usage_in_bytes") if self.mem else None

    def memory_peak_bytes(self) -> int | None:
        return _read_int(self.mem / "memory.max_usage_in_bytes") if self.mem else None

    def pids(self) -> list[int]:
        return [int(x) for x in _read(self.cpu / "cgroup.procs").split()]

    def task_count(self) -> int:
        return len(_read(self.cpu / "tasks").split())

    def cleanup(self) -> None:
        self.kill_all()
        for d in self.dirs:
            _rmdir_retry(d)

    def describe(self) -> dict:
        return {"kind": self.kind, "exact_cpu": True, "path": str(self.cpu),
                "memory": "memory.usage_in_bytes" if self.mem else None}


PR_SET_CHILD_SUBREAPER = 36


class GroupProc(Group):
    """Fallback: /proc walk from the server's pid, with the harness as child subreaper."""

    kind = "proc"
    exact = False

    def __init__(self) -> None:
        self.root_pid: int | None = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except OSError:
            pass

    def attach_self(self) -> None:
        pass

    def set_root(self, pid: int) -> None:
        self.root_pid = pid

    def pids(self) -> list[int]:
        if self.root_pid is None:
            return []
        children: dict[int, list[int]] = {}
        for ent in os.listdir("/proc"):
            if not ent.isdigit():
                continue
            try:
                st = _read(Path(f"/proc/{ent}/stat"))
            except OSError:
                continue
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(ent))
        out, todo = [], [self.root_pid]
        while todo:
            p = todo.pop()
            if os.path.exists(f"/proc/{p}"):
                out.append(p)
            todo.extend(children.get(p, []))
        return out

    def cpu_ns(self) -> int:
        total = 0
        for pid in self.pids():
            try:
                f = _read(Path(f"/proc/{pid}/stat"))
            except OSError:
                continue
            v = f[f.rindex(")") + 2:].split()
            # utime stime cutime cstime: fields 14..17 (1-based), here offset by 3.
            total += sum(int(x) for x in v[11:15])
        return total * 1_000_000_000 // CLK_TCK

    def describe(self) -> dict:
        why = "; ".join(getattr(self, "errors", [])) or f"no cgroup hierarchy at {CG_ROOT}"
        return {"kind": "proc", "exact_cpu": False,
                "note": f"no cgroup could be made ({why}): /proc walk with a child subreaper; "
                        "CPU of descendants is counted once they are reaped, at clock-tick "
                        "resolution"}


def maker_alive(name: str) -> bool | None:
    """Whether the process that made the group of this name (yard-<pid>-...) still runs;
    None for a name that is not of that form (not the harness's)."""
    m = OWNED_NAME.match(name)
    if not m:
        return None
    try:
        os.kill(int(m.group(1)), 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _group_dirs(root: Path) -> list[Path]:
    """The directories under which the harness makes its groups: the v2 root, or each v1
    controller it uses."""
    if (root / "cgroup.controllers").exists():
        return [root]
    return [root / c for c in V1_CONTROLLERS if (root / c).is_dir()]


def sweep_orphans(root: Path = CG_ROOT) -> list[str]:
    """Remove the groups whose maker is gone (named yard-<pid>-..., that pid no longer
    running), killing anything still in them first; returns the paths removed. A maker that
    exits normally removes its own group: this is for one that was killed."""
    removed = []
    for parent in _group_dirs(root):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if maker_alive(name) is not False:
                continue
            path = parent / name
            try:
                for pid in _read(path / "cgroup.procs").split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
                _rmdir_retry(path)
                removed.append(str(path))
            except OSError:
                pass  # gone meanwhile, or not ours to remove: left as it is
    return removed


def make_group(name: str, prefer: str = "auto") -> Group:
    """Make a cgroup for one trial. prefer: auto|v2|v1|proc. Groups of makers that died
    without removing theirs are removed first."""
    sweep_orphans()
    errors = []
    if prefer in ("auto", "v2") and (CG_ROOT / "cgroup.controllers").exists():
        try:
            return GroupV2(name)
        except OSError as e:
            errors.append(f"v2: {e}")
    if prefer in ("auto", "v1") and (CG_ROOT / "cpuacct" / "cpuacct.usage").exists():
        try:
            return GroupV1(name)
        except OSError as e:
            errors.append(f"v1: {e}")
    g = GroupProc()
    g.errors = errors  # type: ignore[attr-defined]
    return g
