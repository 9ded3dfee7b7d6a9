"""yard-cswitch, the context-switch lab (docs/cswitch.md): every kind gives a
positive, finite cost; the kernel's own switch counts agree with the
ping-pong; the sweep enumerates the study's grid; the JSON/CSV schema is
stable; bad flags are usage errors that name the flag.

Runs use small N so the whole file stays within seconds on a loaded machine;
no test asserts on a timing beyond "positive and finite"."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess

import pytest

from conftest import BIN, SANITIZER_MARKERS

CSWITCH = BIN / "yard-cswitch"
KINDS = ["process-pipe", "thread-pipe", "thread-futex", "coro", "ucontext", "ucontext-sigmask"]
KERNEL_KINDS = ["process-pipe", "thread-pipe", "thread-futex"]
SMALL = ["--switches", "2000", "--groups", "2", "--iterations", "2"]

SWEEP_SIZES = [2**k for k in range(10, 21)]
SWEEP_STRIDES = [0, 8, 16, 32, 64, 128, 256]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run([str(CSWITCH), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    for marker in SANITIZER_MARKERS:
        assert marker not in r.stderr, r.stderr
    return r


def run_json(*args: str) -> tuple[list, str]:
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_gives_a_positive_finite_cost(kind):
    points, _ = run_json("--kind", kind, *SMALL)
    assert len(points) == 1
    p = points[0]
    assert p["kind"] == kind and p["array_bytes"] == 0 and p["stride_bytes"] == 0
    assert math.isfinite(p["direct_ns"]) and p["direct_ns"] > 0
    assert p["t_switch_ns"] > 0 and p["t_single_ns"] >= 0
    assert p["switches_expected"] == 2 * 2000 * 2 * 2
    if kind in KERNEL_KINDS:
        assert isinstance(p["switches_measured"], int)
    else:
        assert p["switches_measured"] is None  # a user-level switch is invisible to the kernel


def test_process_pipe_switches_match_the_kernel_count():
    n, groups, iterations = 5000, 2, 2
    points, _ = run_json("--kind", "process-pipe", "--switches", n, "--groups", groups,
                         "--iterations", iterations)
    p = points[0]
    expected = 2 * n * groups * iterations
    assert p["switches_expected"] == expected
    assert abs(p["switches_measured"] - expected) <= 0.01 * expected, p
    assert p["flagged"] is False and p["flag_reason"] is None


def test_kinds_are_measured_in_table_order():
    r = run("--kind", "ucontext,coro", *SMALL, "--json")
    assert r.returncode == 0, r.stderr
    assert [p["kind"] for p in json.loads(r.stdout)] == ["coro", "ucontext"]


def test_restricted_sweep_measures_exactly_the_grid():
    points, _ = run_json("--kind", "ucontext,thread-futex", "--sizes", "1K,2^11",
                         "--strides", "0,8,64", "--switches", "300", "--groups", "1",
                         "--iterations", "1")
    got = [(p["kind"], p["array_bytes"], p["stride_bytes"]) for p in points]
    want = [(k, s, t) for k in ["thread-futex", "ucontext"] for s in [1024, 2048]
            for t in [0, 8, 64]]
    assert got == want
    for p in points:
        assert math.isfinite(p["direct_ns"]) and p["t_switch_ns"] > 0


def test_full_default_grid_is_enumerated():
    points, _ = run_json("--sweep", "--list-points")
    kinds = KINDS
    got = sorted((p["kind"], p["array_bytes"], p["stride_bytes"]) for p in points)
    want = sorted((k, s, t) for k in kinds for s in SWEEP_SIZES for t in SWEEP_STRIDES)
    assert got == want
    assert len(points) == len(kinds) * 11 * 7


def test_without_sweep_one_no_work_point_per_kind():
    points, _ = run_json("--list-points")
    kinds = KINDS
    assert sorted(p["kind"] for p in points) == sorted(kinds)
    assert all(p["array_bytes"] == 0 and p["stride_bytes"] == 0 for p in points)


def test_size_range_expands_to_powers_of_two():
    points, _ = run_json("--kind", "ucontext", "--sizes", "2^10..4K", "--strides", "8",
                         "--list-points")
    assert [p["array_bytes"] for p in points] == [1024, 2048, 4096]


def test_json_schema_is_stable():
    points, _ = run_json("--kind", "thread-pipe,ucontext", "--switches", "500", "--groups", "3",
                         "--iterations", "1")
    types = {
        "kind": str, "array_bytes": int, "stride_bytes": int, "direct_ns": float,
        "direct_ns_median": float, "direct_ns_min": float, "direct_ns_max": float,
        "t_switch_ns": float, "t_single_ns": float, "switches_per_run": int,
        "switches_expected": int, "involuntary_switches": int, "flagged": bool, "n": int,
        "groups": int, "iterations": int, "warmup": int, "cpu": int, "sched_fifo": bool,
    }
    for p in points:
        for key, t in types.items():
            assert key in p, key
            # JSON has one number type: an integral float may print as 0.000 or 0.
            ok = isinstance(p[key], (int, float)) if t is float else type(p[key]) is t
            assert ok, (key, p[key])
        assert p["switches_measured"] is None or type(p["switches_measured"]) is int
        assert p["counters"] is None or isinstance(p["counters"], dict)
        assert p["counters_single"] is None or isinstance(p["counters_single"], dict)
        assert p["flag_reason"] is None or isinstance(p["flag_reason"], str)
        assert p["groups"] == 3 and p["iterations"] == 1 and p["n"] == 500
        assert p["direct_ns_min"] <= p["direct_ns_median"] <= p["direct_ns_max"]
        assert p["direct_ns"] == p["direct_ns_median"]
    assert points[0]["switches_measured"] is not None and points[1]["switches_measured"] is None


def test_hardware_counters_are_reported_or_declared_unsupported():
    points, err = run_json("--kind", "ucontext", "--switches", "500", "--groups", "1",
                           "--iterations", "1")
    if points[0]["counters"] is None:
        assert "hardware counters: not supported" in err
        assert err.count("not supported") == 1
    else:
        c = points[0]["counters"]
        assert c["instructions"] > 0
        for key in ("l1d_misses_pki", "l1i_misses_pki", "dtlb_misses_pki", "itlb_misses_pki"):
            assert key in c


def test_csv_has_a_header_and_one_row_per_point():
    r = run("--kind", "ucontext,thread-futex", "--strides", "0,8", "--sizes", "1K",
            "--switches", "200", "--groups", "1", "--iterations", "1", "--csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [(x["kind"], x["stride_bytes"]) for x in rows] == [
        ("thread-futex", "0"), ("thread-futex", "8"), ("ucontext", "0"), ("ucontext", "8")]
    for x in rows:
        assert float(x["direct_ns"]) == float(x["direct_ns"])  # parses, not NaN
        assert x["switches_expected"] == "400"
    assert rows[0]["switches_measured"] != "" and rows[2]["switches_measured"] == ""


def test_cpu_flag_chooses_the_cpu():
    cpu = max(os.sched_getaffinity(0))
    points, _ = run_json("--kind", "thread-futex", "--cpu", cpu, "--switches", "200",
                         "--groups", "1", "--iterations", "1")
    assert points[0]["cpu"] == cpu


def test_human_table_lists_every_point():
    r = run("--kind", "ucontext,ucontext-sigmask", "--switches", "200", "--groups", "1",
            "--iterations", "1")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if not line.startswith("#")]
    assert rows[0][0] == "kind"
    assert [row[0] for row in rows[1:]] == ["ucontext", "ucontext-sigmask"]


def test_help_explains_every_flag():
    r = run("--help")
    assert r.returncode == 0
    for flag in ["--kind", "--switches", "--groups", "--iterations", "--warmup", "--cpu",
                 "--sweep", "--sizes", "--strides", "--json", "--csv", "--list-points",
                 "--no-fifo", "--no-counters", "--help"]:
        assert flag in r.stdout, flag
    for kind in KINDS:
        assert kind in r.stdout, kind


@pytest.mark.parametrize("args,flag", [
    (["--switches", "0"], "--switches"),
    (["--switches", "abc"], "--switches"),
    (["--switches"], "--switches"),
    (["--groups", "-1"], "--groups"),
    (["--iterations", "1x"], "--iterations"),
    (["--warmup", "-5"], "--warmup"),
    (["--kind", "fibers"], "--kind"),
    (["--kind", "coro,,ucontext"], "--kind"),
    (["--sizes", "12"], "--sizes"),
    (["--sizes", "2^40"], "--sizes"),
    (["--sizes", "4K..1K"], "--sizes"),
    (["--strides", "3"], "--strides"),
    (["--cpu", "5000"], "--cpu"),
    (["--cpu", "1000"], "--cpu"),
    (["--json", "--csv"], "--json"),
    (["--sweep=yes"], "--sweep"),
    (["--bogus"], "--bogus"),
])
def test_bad_flags_exit_2_naming_the_flag(args, flag):
    r = run(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert flag in r.stderr, r.stderr
    assert r.stdout == ""
