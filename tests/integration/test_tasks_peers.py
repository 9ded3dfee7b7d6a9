"""The Fibonacci peers of issue 22 (docs/peers.md): `peers/go/run fib` (goroutines and a
WaitGroup) and `peers/java/run fib` (ForkJoinPool and RecursiveTask) give the exact
fib(N) under cutoffs 0, 5 and 20, print exactly yard-tasks' JSON keys, count their tasks
exactly, and answer a bad command line with exit status 2 and a message.

The JVM takes ~0.2 s to start, so the Java peer runs a representative set of N per cutoff
rather than all of 0..25; the Go peer runs them all. A peer that is not built (`make -C
peers go java`) is skipped with the reason; YARD_PEERS=0 leaves both out, as it does the
other peers."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import BIN, PEERS, ROOT

# yard-tasks' --json schema (tools/tasks), key for key and in its order.
GOLDEN_KEYS = ["tool", "program", "n", "runtime", "workers", "cutoff", "repeat", "result",
               "expected", "correct", "times_s", "min_s", "median_s", "wall_s", "tasks",
               "steals", "ns_per_task", "inline_fallbacks", "cpus"]

# name -> (launcher, the file `make -C peers NAME` builds, runtime in the JSON, N to check)
TASK_PEERS = {
    "go": ("peers/go/run", "peers/go/bin/yard-peer-go", "go", list(range(26))),
    "java": ("peers/java/run", "peers/java/classes/.built", "forkjoin", [0, 1, 2, 3, 10, 25]),
}
CUTOFFS = [0, 5, 20]


def fib_exact(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def tasks_spawned(n: int, cutoff: int) -> int:
    """Two tasks for every call with n >= 2 above the cutoff."""
    if n < 2 or n <= cutoff:
        return 0
    return 2 + tasks_spawned(n - 1, cutoff) + tasks_spawned(n - 2, cutoff)


def launcher(peer: str) -> list[str]:
    if not PEERS:
        pytest.skip("YARD_PEERS=0: the peers are left out")
    run, marker, _, _ = TASK_PEERS[peer]
    if not (ROOT / marker).exists():
        pytest.skip(f"peer {peer} is not built ({marker} is missing; make -C peers {peer})")
    return [str(ROOT / run)]


def fib(peer: str, *args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*launcher(peer), "fib", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def fib_json(peer: str, *args) -> dict:
    r = fib(peer, *args, "--json")
    assert r.returncode == 0, (args, r.stderr)
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout  # exactly one JSON object
    return json.loads(lines[0])


@pytest.mark.parametrize("cutoff", CUTOFFS)
@pytest.mark.parametrize("peer", list(TASK_PEERS))
def test_exact_fib_and_exact_task_count(peer, cutoff):
    runtime, ns = TASK_PEERS[peer][2], TASK_PEERS[peer][3]
    for n in ns:
        workers = 1 + n % 2  # one and two workers alike
        out = fib_json(peer, n, "--workers", workers, "--cutoff", cutoff, "--repeat", 2)
        where = (peer, n, cutoff)
        assert out["result"] == out["expected"] == fib_exact(n), where
        assert out["correct"] is True, where
        assert (out["tool"], out["program"], out["runtime"]) == ("yard-tasks", "fib", runtime)
        assert (out["n"], out["workers"], out["cutoff"], out["repeat"]) == (n, workers, cutoff, 2)
        assert out["tasks"] == tasks_spawned(n, cutoff), where
        assert len(out["times_s"]) == len(out["wall_s"]) == 2, where
        assert all(t >= 0 for t in out["times_s"]), where
        assert all(w >= t for w, t in zip(out["wall_s"], out["times_s"])), where
        assert out["min_s"] == min(out["times_s"]), where
        assert out["median_s"] == pytest.approx(sum(out["times_s"]) / 2), where
        if out["tasks"]:
            assert out["ns_per_task"] == pytest.approx(out["median_s"] * 1e9 / out["tasks"])
        else:
            assert out["ns_per_task"] is None, where
        if peer == "go":
            assert out["steals"] is None  # the Go scheduler does not tell
        else:
            assert isinstance(out["steals"], int) and out["steals"] >= 0
        assert out["inline_fallbacks"] == 0 and out["cpus"] >= 1, where


@pytest.mark.parametrize("peer", list(TASK_PEERS))
def test_json_keys_are_yard_tasks_keys(peer):
    out = fib_json(peer, 12, "--workers", 2, "--cutoff", 4, "--repeat", 3)
    assert list(out) == GOLDEN_KEYS
    assert len(out["times_s"]) == 3


def test_yard_tasks_has_the_same_keys():
    """The C tool the peers stand beside, when this build has it."""
    tool = BIN / "yard-tasks"
    if not tool.exists():
        pytest.skip(f"no yard-tasks in {BIN}")
    r = subprocess.run([str(tool), "fib", "12", "--runtime", "coro", "--workers", "2",
                        "--cutoff", "4", "--repeat", "2", "--json"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == set(GOLDEN_KEYS)
    assert out["result"] == fib_exact(12)


@pytest.mark.parametrize("peer", list(TASK_PEERS))
def test_deep_recursion_one_worker(peer):
    """fib(25) with a task for every call, all of them on one worker."""
    out = fib_json(peer, 25, "--workers", 1, "--cutoff", 0, "--repeat", 1)
    assert out["result"] == 75025 and out["tasks"] == tasks_spawned(25, 0) == 242784


@pytest.mark.parametrize("peer", list(TASK_PEERS))
def test_text_output_and_defaults(peer):
    r = fib(peer, 20, "--workers", 2)
    assert r.returncode == 0, r.stderr
    assert "fib(20) = 6765 (expected 6765)" in r.stdout
    assert "over 5 repetitions" in r.stdout  # the default repeat
    out = fib_json(peer, 20)  # --workers defaults to the CPUs it may use
    assert out["cutoff"] == 20 and out["repeat"] == 5 and out["workers"] == out["cpus"]


BAD = [
    ([], "N"),
    (["93"], "93"),
    (["-1"], ""),
    (["abc"], "abc"),
    (["10", "11"], "N"),
    (["10", "--workers", "0"], "workers"),
    (["10", "--workers"], "workers"),
    (["10", "--cutoff", "-1"], "cutoff"),
    (["10", "--repeat", "0"], "repeat"),
    (["10", "--bogus"], "bogus"),
]


@pytest.mark.parametrize("peer", list(TASK_PEERS))
def test_usage_errors_exit_2(peer):
    for args, names in BAD:
        r = fib(peer, *args)
        assert r.returncode == 2, (peer, args, r.stdout, r.stderr)
        assert r.stdout == "", (peer, args)
        assert r.stderr.strip() and names in r.stderr, (peer, args, r.stderr)


def test_go_server_flags_unchanged():
    """`fib` is a first argument only: the server's command line is as before."""
    r = subprocess.run([*launcher("go"), "--app", "echo"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "--listen is required" in r.stderr
    r = subprocess.run([*launcher("go"), "--app", "echo", "--listen", "127.0.0.1:0", "fib"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "unexpected argument" in r.stderr


def test_java_launcher_flags_can_be_replaced():
    """YARD_JAVA_OPTS replaces the launcher's JVM flags (docs/peers.md)."""
    env = dict(os.environ, YARD_JAVA_OPTS="-Xmx64m -XX:+UseSerialGC")
    r = subprocess.run([*launcher("java"), "fib", "15", "--workers", "1", "--json"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["result"] == 610
