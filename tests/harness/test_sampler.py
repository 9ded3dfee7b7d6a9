"""Calibration of the cgroup sampler: needs root (to make cgroups)."""

import harness_paths  # noqa: F401  (puts python/ on sys.path)
import os
import subprocess
import sys
import time

import pytest

from yard.cgroup import GroupProc, make_group, sweep_orphans
from yard.sampler import Sampler
from yard.stats import cpu_mean_cv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")

# Burns 50% of one core, regulated on its own CPU time so a busy machine does not skew it
# (it can only fall short if it cannot get half a core at all).
HALF_CORE = """
import os, time
t0 = time.monotonic(); c0 = time.process_time()
while (w := time.monotonic() - t0) < {secs}:
    if time.process_time() - c0 < 0.5 * w:
        x = 0
        for _ in range(2000): x += 1
    else:
        time.sleep(0.002)
"""

# Forks a child every 200 ms; each child burns 100 ms of CPU and exits (shorter than a sample).
FORKER = """
import os, time
n = 0
end = time.monotonic() + {secs}
while time.monotonic() < end:
    pid = os.fork()
    if pid == 0:
        c0 = time.process_time()
        while time.process_time() - c0 < 0.1: pass
        os._exit(0)
    n += 1
    time.sleep(0.2)
while True:
    try: os.wait()
    except ChildProcessError: break
print(n, flush=True)
"""


def pinned_cpu() -> set[int]:
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[-1]}


def run_in_group(code: str, interval: float = 0.5):
    g = make_group(f"yard-test-{os.getpid()}-{time.monotonic_ns()}")
    assert g.kind in ("v1", "v2"), f"expected a cgroup, got {g.describe()}"
    cpus = pinned_cpu()

    def pre():
        g.attach_self()
        os.sched_setaffinity(0, cpus)

    try:
        s = Sampler(g, interval)
        s.start()
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             preexec_fn=pre)
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        totals = s.stop()
        return out, s.samples, totals
    finally:
        g.cleanup()


@pytest.mark.timing  # needs half a core to itself
def test_half_core_is_measured_at_50_percent():
    _, samples, totals = run_in_group(HALF_CORE.format(secs=5))
    overall = 100.0 * totals["cpu_s"] / totals["wall_s"]
    mean, cv = cpu_mean_cv([s["cpu_pct"] for s in samples])
    # The python start-up (~30 ms of CPU) is included in the group's total.
    assert 47.0 <= overall <= 53.5, overall
    assert 47.0 <= mean <= 53.0, (mean, [round(s["cpu_pct"]) for s in samples])
    assert len(samples) >= 8


def test_short_lived_children_are_measured_completely():
    out, samples, totals = run_in_group(FORKER.format(secs=2.0))
    n = int(out.strip())
    expected = 0.1 * n
    # Every child's 100 ms is in the group's counter even though each lived < one sample;
    # the parent adds its own start-up and fork cost on top.
    assert n >= 8
    assert expected * 0.97 <= totals["cpu_s"] <= expected + 0.25, (n, totals["cpu_s"])
    assert max(s["procs"] for s in samples) >= 1


def test_a_group_whose_maker_died_is_swept_and_a_living_makers_is_kept():
    g = make_group(f"yard-{os.getpid()}-mine")
    if isinstance(g, GroupProc):
        pytest.skip("no cgroup can be made here")
    parent = (getattr(g, "cpu", None) or g.path).parent
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = parent / f"yard-{dead.pid}-orphan"
    orphan.mkdir()
    try:
        assert str(orphan) in sweep_orphans()
        assert not orphan.exists()
        assert (parent / f"yard-{os.getpid()}-mine").exists()
    finally:
        if orphan.exists():
            orphan.rmdir()
        g.cleanup()


def test_cgroup_is_removed_after_cleanup():
    g = make_group(f"yard-test-clean-{os.getpid()}")
    path = getattr(g, "cpu", None) or getattr(g, "path")
    assert path.exists()
    g.cleanup()
    assert not path.exists()
