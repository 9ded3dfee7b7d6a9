"""`yard compare FULL QUICK` (issue 41) on synthetic results: only pairs the full run is sure
of (CIs apart) are checked, and a quick run that ranks one of them the other way is listed."""

import json
import subprocess
import sys
from pathlib import Path

import harness_paths  # noqa: F401  (puts python/ on sys.path)
from harness_paths import REPO

from yard.compare import compare, text


def _results(d: Path, figures: dict, plots=("throughput_per_s", "latency_p99_us"), reps=5,
             messages=10000):
    """figures: {(alternative, connections): (throughput, p99)}; reps trials each, +-1%; every
    point at one message count (the run's size)."""
    n = 0
    for (alt, c), (tp, p99) in figures.items():
        for r in range(reps):
            k = 1 + 0.01 * (r - reps // 2)
            t = {"experiment": "echo", "alternative": alt, "model": alt, "rep": r, "status": "ok",
                 "point": {"connections": c, "messages": messages}, "problems": [],
                 "metrics": {"throughput_per_s": tp * k, "latency_p99_us": p99 * k}}
            raw = d / "raw" / "echo"
            raw.mkdir(parents=True, exist_ok=True)
            (raw / f"{n}.json").write_text(json.dumps(t))
            n += 1
    alts = sorted({a for a, _ in figures})
    meta = {"experiments": [{"name": "echo", "alternatives": alts, "plots": list(plots),
                             "metric": plots[0], "sweep": {"connections": [10, 100],
                                                           "messages": [messages]}}]}
    (d / "meta.json").write_text(json.dumps(meta))
    return d


FULL = {("epoll", 10): (1000, 50), ("fork", 10): (500, 80), ("coro", 10): (1003, 51),
        ("epoll", 100): (900, 70), ("fork", 100): (300, 200), ("coro", 100): (700, 90)}


def test_agreeing_runs_have_no_disagreement(tmp_path):
    full = _results(tmp_path / "full", FULL)
    quick = _results(tmp_path / "quick", {k: (tp * 1.1, p * 0.9) for k, (tp, p) in FULL.items()
                                          if k[1] == 100 or k[0] != "coro"}, reps=2)
    res = compare(full, quick)
    # 3 pairs x 2 points x 2 metrics; epoll/coro at 10 connections overlap in the full run
    # (1000 vs 1003, +-2%) for both metrics, so they are not checked.
    assert res["pairs"] == 12 and res["sure"] == 10
    # coro at 10 connections is not in the quick run: its two sure pairs x 2 metrics.
    assert res["not_in_quick"] == 2
    assert res["disagreements"] == []
    assert "0 disagreement(s)" in text(res)


def test_a_reversed_pair_is_listed(tmp_path):
    full = _results(tmp_path / "full", FULL)
    q = dict(FULL)
    q[("coro", 100)] = (950, 60)   # quick says coro beats epoll at 100 (full: 700 vs 900)
    q[("epoll", 10)] = (1100, 50)  # epoll/coro at 10 overlap in the full run: not a finding
    # A smaller run (200 messages, not 10000): its points still meet the full run's.
    quick = _results(tmp_path / "quick", q, reps=1, messages=200)
    res = compare(full, quick)
    found = [(d.point, d.metric, d.better, d.worse) for d in res["disagreements"]]
    assert res["sure"] == 10 and res["not_in_quick"] == 0
    assert sorted(found) == [("connections=100", "latency_p99_us", "epoll", "coro"),
                             ("connections=100", "throughput_per_s", "epoll", "coro")]
    assert "full ranks epoll over coro" in text(res)
    # The command: the same list, and exit status 1.
    p = subprocess.run([sys.executable, "-m", "yard.cli", "compare", str(full), str(quick)],
                       cwd=REPO, capture_output=True, text=True,
                       env={"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 1, p.stderr
    assert "2 disagreement(s)" in p.stdout and p.stdout.count("quick does not") == 2
