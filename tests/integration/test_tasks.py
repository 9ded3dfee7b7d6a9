"""yard-tasks, the Eve study's parallel Fibonacci under several task runtimes
(issue 22, docs/tasks.md): every runtime this build can run gives the exact
value for N = 0..25 under cutoffs 0, 5 and 20 and counts the same tasks; a
tree of 242,784 coroutine tasks (more than memory for their stacks would
allow at once) completes; the JSON has the documented schema; usage errors
exit 2 with a message. Nothing here asserts on a timing.

Runtimes the binary lists as unavailable are skipped with its reason.
Under ThreadSanitizer (the binary says so in --list-runtimes --json, or
YARD_TSAN=1) openmp and tbb are skipped: their libraries are not
instrumented, so TSan reports races it cannot see the synchronisation of.
The TSan build also runs smaller trees (a coroutine costs ~0.5 ms there)."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
from functools import lru_cache

import pytest

from conftest import BIN, SANITIZER_MARKERS

TASKS = BIN / "yard-tasks"
RUNTIMES = ["coro-perms", "coro", "threads", "openmp", "tbb"]
UNINSTRUMENTED = {"openmp": "libgomp/libomp", "tbb": "libtbb"}
MAX_N = 92

SCHEMA = {"tool": str, "program": str, "n": int, "runtime": str, "workers": int, "cutoff": int,
          "repeat": int, "result": int, "expected": int, "correct": bool, "times_s": list,
          "min_s": float, "median_s": float, "wall_s": list, "tasks": int,
          "steals": (int, type(None)), "ns_per_task": (float, type(None)),
          "inline_fallbacks": int, "cpus": int}


def run(*args, timeout: float = 120, preexec_fn=None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(TASKS), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    for marker in SANITIZER_MARKERS:
        assert marker not in r.stderr, r.stderr
    return r


def run_json(*args, timeout: float = 120, preexec_fn=None) -> dict:
    r = run(*args, "--json", timeout=timeout, preexec_fn=preexec_fn)
    assert r.returncode == 0, (args, r.stderr)
    return json.loads(r.stdout)


@lru_cache(maxsize=None)
def listing() -> dict:
    return run_json("--list-runtimes")


def sanitizer() -> str | None:
    if os.environ.get("YARD_TSAN") == "1":
        return "thread"
    return listing()["sanitizer"]


def tsan() -> bool:
    return sanitizer() == "thread"


def need(runtime: str) -> None:
    """Skip, with the reason, a runtime this build or machine cannot run."""
    entry = {r["name"]: r for r in listing()["runtimes"]}[runtime]
    if not entry["available"]:
        pytest.skip(f"{runtime} unavailable: {entry['reason']}")
    if sanitizer() == "thread" and runtime in UNINSTRUMENTED:
        pytest.skip(f"{runtime} under ThreadSanitizer: {UNINSTRUMENTED[runtime]} is not "
                    "instrumented, so TSan reports false races")


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def tasks_of(n: int, cutoff: int) -> int:
    """Spawns below the root: 0 if n < 2 or n <= cutoff, else 2 + T(n-1) + T(n-2)."""
    t = [0] * (n + 1)
    for i in range(n + 1):
        t[i] = 0 if i < 2 or i <= cutoff else 2 + t[i - 1] + t[i - 2]
    return t[n]


def check(doc: dict, n: int, cutoff: int, runtime: str) -> None:
    assert doc["result"] == doc["expected"] == fib(n), doc
    assert doc["correct"] is True
    assert doc["tasks"] == tasks_of(n, cutoff), doc
    assert doc["runtime"] == runtime and doc["n"] == n and doc["cutoff"] == cutoff


def test_task_count_formula():
    # cutoff 0: a task for every call with n >= 2, T(n) = 2 * (fib(n + 1) - 1)
    for n in range(2, 40):
        assert tasks_of(n, 0) == 2 * (fib(n + 1) - 1)
    assert tasks_of(25, 0) == 242784
    assert tasks_of(25, 25) == 0 and tasks_of(1, 0) == 0


def sweep(runtime: str, ns, cutoff: int, workers: int = 2) -> None:
    for n in ns:
        doc = run_json("fib", n, "--runtime", runtime, "--workers", workers, "--cutoff", cutoff,
                       "--repeat", 1)
        check(doc, n, cutoff, runtime)


@pytest.mark.parametrize("cutoff", [5, 20])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_exact_for_every_n(runtime, cutoff):
    """N = 0..25. Under ThreadSanitizer a coroutine costs about half a
    millisecond (its fiber bookkeeping): cutoff 5 stops at N = 20 there
    (3,192 tasks), not 25 (35,420). So does the threads runtime under
    AddressSanitizer, where each task's kernel thread gets its own shadow
    stack: N = 0..25 cost 37 CPU seconds there, the most of any test in the
    ASan suite (the release build runs every N)."""
    need(runtime)
    slow = tsan() or (sanitizer() == "address" and runtime == "threads")
    top = 20 if slow and cutoff < 20 else 25
    sweep(runtime, range(0, top + 1), cutoff)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_exact_with_a_task_per_call(runtime):
    """Cutoff 0: a task for every call. The threads runtime makes a kernel
    thread of each (39 us apiece here), so it stops at a smaller N."""
    need(runtime)
    small = [0, 1, 2, 3, 4, 7, 10, 13]
    if runtime == "threads":
        ns = small + ([] if tsan() else [15])
    elif tsan():
        ns = small + [16]
    else:
        ns = small + [18, 25]
    sweep(runtime, ns, 0)


@pytest.mark.parametrize("runtime", ["coro", "coro-perms"])
def test_deep_recursion_more_tasks_than_stacks(runtime):
    """fib(25) with a task per call: 242,784 coroutines, 15 GiB if each held
    a 64 KiB stack at once. A coroutine gets its stack when it first runs and
    gives it back when it ends (and a join runs a child that never started
    on its own stack), so the run completes with a few stacks mapped.
    (Under ThreadSanitizer, where a coroutine costs about half a millisecond,
    fib(18): 8,360 tasks.)"""
    need(runtime)
    n = 18 if tsan() else 25
    r = run("fib", n, "--runtime", runtime, "--workers", 2, "--cutoff", 0, "--repeat", 1,
            timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"fib({n}) = {fib(n)} (correct)" in r.stdout, r.stdout
    assert f"tasks  {tasks_of(n, 0)} per repetition" in r.stdout, r.stdout
    m = re.search(r"stacks (\d+) coroutine stacks mapped", r.stdout)
    assert m, r.stdout
    # (0 is possible: a join runs a child nobody stole on its own stack)
    assert 0 <= int(m.group(1)) < tasks_of(n, 0) // 10, r.stdout
    assert re.search(r"inlined \d+ children", r.stdout), r.stdout
    if n == 25:
        doc = run_json("fib", 25, "--runtime", runtime, "--workers", 2, "--cutoff", 0,
                       "--repeat", 1, timeout=300)
        assert doc["tasks"] == 242784
        check(doc, 25, 0, runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_json_schema(runtime):
    need(runtime)
    doc = run_json("fib", 15, "--runtime", runtime, "--workers", 2, "--cutoff", 5,
                   "--repeat", 3)
    assert set(doc) == set(SCHEMA), set(doc) ^ set(SCHEMA)
    for key, kind in SCHEMA.items():
        assert isinstance(doc[key], kind), (key, doc[key])
    assert doc["tool"] == "yard-tasks" and doc["program"] == "fib"
    assert doc["workers"] == 2 and doc["repeat"] == 3
    assert len(doc["times_s"]) == len(doc["wall_s"]) == 3
    assert all(t > 0 for t in doc["times_s"])
    assert doc["min_s"] == min(doc["times_s"])
    assert doc["median_s"] == sorted(doc["times_s"])[1]
    assert all(w >= t for w, t in zip(doc["wall_s"], doc["times_s"]))
    assert doc["ns_per_task"] == pytest.approx(doc["median_s"] * 1e9 / doc["tasks"], rel=1e-3)
    assert doc["cpus"] == len(os.sched_getaffinity(0))
    if runtime.startswith("coro"):
        assert isinstance(doc["steals"], int) and doc["steals"] >= 0
    else:
        assert doc["steals"] is None
    assert doc["inline_fallbacks"] == 0 or runtime == "threads"


def test_no_tasks_no_cost_per_task():
    doc = run_json("fib", 10, "--runtime", "coro", "--cutoff", 20, "--repeat", 1)
    assert doc["tasks"] == 0 and doc["ns_per_task"] is None
    assert doc["result"] == 55


def test_defaults():
    doc = run_json("fib", 12, "--runtime", "coro")
    assert doc["workers"] == len(os.sched_getaffinity(0)) == doc["cpus"]
    assert doc["cutoff"] == 20 and doc["repeat"] == 5


def test_human_summary():
    r = run("fib", 20, "--runtime", "coro", "--workers", 2, "--cutoff", 10, "--repeat", 2)
    assert r.returncode == 0, r.stderr
    assert "fib(20) = 6765 (correct)" in r.stdout
    assert "median" in r.stdout and "ns per task" in r.stdout


def test_threads_fall_back_inline_when_no_thread_can_be_made():
    """With the address space capped, pthread_create soon fails (EAGAIN):
    those subtrees run inline, are counted, and the result is still exact."""
    if sanitizer():
        pytest.skip("the sanitizers reserve terabytes of address space: no cap possible")

    def cap_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))

    doc = run_json("fib", 18, "--runtime", "threads", "--workers", 2, "--cutoff", 0,
                   "--repeat", 1, preexec_fn=cap_address_space)
    check(doc, 18, 0, "threads")
    assert doc["inline_fallbacks"] > 0, doc


def test_list_runtimes():
    doc = listing()
    assert doc["tool"] == "yard-tasks"
    assert [r["name"] for r in doc["runtimes"]] == RUNTIMES
    for r in doc["runtimes"]:
        assert isinstance(r["available"], bool)
        if r["available"]:
            assert r["reason"] is None
        else:
            assert r["reason"], r
    for name in ["coro", "coro-perms", "threads"]:
        assert {r["name"]: r for r in doc["runtimes"]}[name]["available"]
    text = run("--list-runtimes")
    assert text.returncode == 0 and all(name in text.stdout for name in RUNTIMES)


def test_an_unavailable_runtime_is_a_usage_error_with_the_reason():
    gone = [r for r in listing()["runtimes"] if not r["available"]]
    if not gone:
        pytest.skip("every runtime is available in this build")
    r = run("fib", 10, "--runtime", gone[0]["name"])
    assert r.returncode == 2
    assert gone[0]["reason"] in r.stderr


def test_help_explains_everything():
    r = run("--help")
    assert r.returncode == 0
    for word in ["fib N", "--runtime", "--workers", "--cutoff", "--repeat", "--json",
                 "--list-runtimes", "ns_per_task", "inline_fallbacks", "Exit status", *RUNTIMES]:
        assert word in r.stdout, word


@pytest.mark.parametrize("args, message", [
    (["fib", 10, "--runtime", "nope"], "unknown runtime 'nope'"),
    (["fib", 93, "--runtime", "coro"], "N must be from 0 to 92"),
    (["fib", -1, "--runtime", "coro"], "N must be from 0 to 92"),
    (["fib", "ten", "--runtime", "coro"], "N must be a whole number"),
    (["fib", "--runtime", "coro"], "missing N"),
    (["fib", 10], "missing --runtime"),
    (["fact", 10, "--runtime", "coro"], "unknown program 'fact'"),
    ([], "missing the program"),
    (["fib", 10, "--runtime", "coro", "--workers", 0], "--workers: expected a whole number"),
    (["fib", 10, "--runtime", "coro", "--workers", "two"], "--workers: expected a whole number"),
    (["fib", 10, "--runtime", "coro", "--workers", 100000], "--workers: expected a whole number"),
    (["fib", 10, "--runtime", "coro", "--cutoff", -3], "--cutoff: expected a whole number"),
    (["fib", 10, "--runtime", "coro", "--repeat", 0], "--repeat: expected a whole number"),
    (["fib", 10, "--runtime", "coro", "--repeat"], "--repeat: missing value"),
    (["fib", 10, "--runtime", "coro", "--frobnicate"], "unknown flag '--frobnicate'"),
    (["fib", 10, 11, "--runtime", "coro"], "unexpected argument '11'"),
    (["--list-runtimes", "--runtime", "coro"], "--list-runtimes takes no"),
])
def test_usage_errors_exit_2_with_a_message(args, message):
    r = run(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stdout == ""
