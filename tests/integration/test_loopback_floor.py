"""yard-loopback-floor: the kernel's own cost of a loopback round trip, the
floor under any closed-loop generator (docs/load.md). Its arithmetic and its
refusals; the figures themselves belong to bench/load_floor.py."""

import json
import subprocess

import pytest

from conftest import BIN

FLOOR = BIN / "yard-loopback-floor"


def floor(*args):
    return subprocess.run([str(FLOOR), *map(str, args)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("size", [8, 16, 4096])
def test_counts_and_shares_add_up(size):
    r = floor("--connections", 7, "--rounds", 30, "--size", size, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["connections"], d["rounds"], d["size"]) == (7, 30, size)
    assert d["round_trips"] == 7 * 30
    assert d["cpu_s"] > 0
    assert d["both_ends_us"] == pytest.approx(d["cpu_s"] / 210 * 1e6, rel=1e-2)
    assert d["one_end_us"] == pytest.approx(d["both_ends_us"] / 2, abs=1e-3)
    assert d["one_end_cpu_s_per_100k"] == pytest.approx(d["one_end_us"] / 10, abs=1e-3)
    assert 0 < d["null_syscall_us"] < d["one_end_us"]
    less = d["one_end_us"] - 2 * d["null_syscall_us"]
    assert d["one_end_less_syscalls_cpu_s_per_100k"] == pytest.approx(less / 10, abs=1e-3)


def test_summary_names_the_floor():
    r = floor("--connections", 2, "--rounds", 10)
    assert r.returncode == 0, r.stderr
    assert "20 round trips of 16 B over 2 loopback connections, every byte checked" in r.stdout
    assert "one end (the floor):" in r.stdout


def test_congestion_control_is_set_or_refused():
    assert floor("--connections", 1, "--rounds", 5, "--congestion", "reno").returncode == 0
    r = floor("--connections", 1, "--rounds", 5, "--congestion", "no-such-algorithm")
    assert r.returncode == 1
    assert "TCP_CONGESTION" in r.stderr


@pytest.mark.parametrize("args,said", [
    (["--size", "7"], "--size: expected a whole number in 8..4096, got '7'"),
    (["--connections", "0"], "--connections: expected a whole number"),
    (["--rounds", "x"], "--rounds: expected a whole number"),
    (["--rounds"], "--rounds needs a value"),
    (["--bogus"], "unknown option '--bogus'"),
])
def test_bad_arguments_exit_2(args, said):
    r = floor(*args)
    assert r.returncode == 2
    assert said in r.stderr


def test_help():
    r = floor("--help")
    assert r.returncode == 0
    for word in ("--connections", "--rounds", "--size", "--congestion", "--json", "floor"):
        assert word in r.stdout
