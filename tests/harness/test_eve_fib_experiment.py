"""experiments/eve_fib.toml (issue 22) and the tool-experiment features it uses: sweep values
from the machine ("1..ncpu"), [[exclude]] tables, a trial pinned to as many CPUs as it has
workers (run.cpus_from), variants skipped with the reason when tool.list_runtimes says their
runtime is missing, and [[report.figures]] (time and speedup against workers with CIs, the
spawn cost at cutoff 0)."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness_paths import BIN, REPO

from yard import report
from yard.cli import list_runtimes, skip_unavailable_runtimes
from yard.experiment import SchemaError, expand_values, load_experiment, point_matches
from yard.runner import Trial, plan, run_trial

EXP = REPO / "experiments" / "eve_fib.toml"
TASKS_RUNTIMES = ["coro-perms", "coro", "threads", "openmp", "tbb"]
# eve: examples/eve/fib_bench.eve compiled by yard-eve (issue 23), beside coro-perms
# eve-printed: the paper's Program 1 as printed, through yard-eve call (issue 42), cutoff 0 only
ALL = ["coro-perms", "eve", "eve-printed"] + TASKS_RUNTIMES[1:] + ["go", "forkjoin"]


def load(ncpu=4):
    return load_experiment(EXP, ncpu=ncpu)


# ---- the experiment file ------------------------------------------------------------------

def test_loads_with_every_runtime_and_peer():
    e = load()
    assert e.kind == "tool" and [a.label for a in e.alternatives] == ALL
    assert {a.label: a.runtime for a in e.alternatives} == {
        **{r: r for r in TASKS_RUNTIMES}, "eve": None, "eve-printed": None, "go": None,
        "forkjoin": None}
    assert e.cpus_from == "workers"
    assert e.list_runtimes == ["{bin}/yard-tasks", "--list-runtimes", "--json"]
    assert [f["metric"] for f in e.figures] == ["min_s", "min_s", "ns_per_task"]
    assert [f.get("speedup", False) for f in e.figures] == [False, True, False]
    assert e.figures[2]["where"] == {"cutoff": 0}
    assert e.in_suite("quick") and e.in_suite("full") and not e.in_suite("smoke")


@pytest.mark.parametrize("ncpu", [1, 2, 6])
def test_workers_come_from_the_machine(ncpu):
    assert load(ncpu).sweep["workers"] == list(range(1, ncpu + 1))


def test_full_sweep_trials():
    e = load(ncpu=3)
    assert e.sweep["n"] == [20, 30, 31, 32, 33, 34, 35] and e.sweep["cutoff"] == [0, 20]
    runs = e.runs()
    # fib(20) only at cutoff 0; threads at cutoff 0 only for fib(20).
    assert not [p for _, p in runs if p["n"] == 20 and p["cutoff"] == 20]
    threads0 = {p["n"] for a, p in runs if a.label == "threads" and p["cutoff"] == 0}
    assert threads0 == {20}
    per_alt = {a.label: 0 for a in e.alternatives}
    for a, _ in runs:
        per_alt[a.label] += 1
    points = (6 * 2 + 1) * 3  # (n 30..35 x 2 cutoffs + fib(20) at cutoff 0) x 3 workers
    # eve-printed: cutoff 0 only (the printed program has none)
    assert per_alt == {**{a: points for a in ALL}, "threads": points - 6 * 3,
                       "eve-printed": points - 6 * 3}
    assert not [p for a, p in runs if a.label == "eve-printed" and p["cutoff"] != 0]
    # Every argv renders: yard-tasks with its runtime, the peers through their launchers.
    a = {x.label: x for x in e.alternatives}
    assert a["tbb"].argv[:5] == ["{bin}/yard-tasks", "fib", "{n}", "--runtime", "tbb"]
    assert a["go"].argv[0] == "peers/go/run" and a["forkjoin"].argv[0] == "peers/java/run"
    assert a["eve"].argv[:3] == ["env", "YARD_EVE_WORKERS={workers}", "{bin}/eve-fib-bench"]
    assert a["eve-printed"].argv == [
        "env", "YARD_EVE_WORKERS={workers}", "{bin}/yard-eve", "call", "--json", "--repeat", "{repeat}",
        "../shared/eve/program1.eve", "fib", "{n}"]
    for x in e.alternatives:
        if x.label == "eve-printed":
            continue
        # eve-fib-bench always prints its JSON record; the others are asked to
        assert (x.argv[-1] == "--json" or x.label == "eve") and "{cutoff}" in x.argv
        assert "{workers}" in x.argv or "YARD_EVE_WORKERS={workers}" in x.argv


def test_quick_suite_is_short():
    q = load(ncpu=8).for_suite("quick")
    runs = q.runs()
    pts = {(p["n"], p["cutoff"]) for _, p in runs}
    assert pts == {(30, 20), (25, 0)}
    assert {p["workers"] for _, p in runs} == {1, 2} and {p["repeat"] for _, p in runs} == {3}
    assert not [1 for a, p in runs if a.label == "threads" and p["cutoff"] == 0]
    # threads is not run at (25, 0) (cutoff 0 beyond fib(20)), eve-printed not at (30, 20)
    # 2 to 3 trials per point (issue 41: adaptive, to a ratio CI of ±5% against tbb)
    assert len(runs) == 2 * 2 * len(ALL) - 2 - 2 and q.repetitions == 2 and q.max_reps() == 3
    assert q.reference() == "tbb" and q.watched_metric() == "min_s"
    assert len(plan([q], seed=1)) == 2 * len(runs)
    # On one CPU, two workers cannot each have one: that point is dropped, with why.
    q1 = load(ncpu=1).for_suite("quick")
    gone = q1.drop_cpu_points(1)
    assert q1.sweep["workers"] == [1] and gone[0]["workers"] == [2]
    assert "1 CPU(s) here" in gone[0]["reason"]


def test_tool_pinned_to_as_many_cpus_as_workers():
    e = load()
    assert e.tool_cpus({"workers": 2}, {3, 5, 7}) == {3, 5}
    assert e.tool_cpus({"workers": 1}, {3, 5, 7}) == {3}
    e.cpus_from = None
    assert e.tool_cpus({"workers": 2}, {0, 1, 2}) == {1}  # run.load_cpus' default


# ---- the schema additions -----------------------------------------------------------------

def test_expand_values():
    p = Path("x.toml")
    assert expand_values("1..ncpu", 4, p, "f") == [1, 2, 3, 4]
    assert expand_values("2..5", 1, p, "f") == [2, 3, 4, 5]
    assert expand_values([1, 2, "ncpu"], 2, p, "f") == [1, 2]
    assert expand_values([1, "ncpu", 64], 8, p, "f") == [1, 8, 64]
    for bad in ("1-4", [], "x", 3):
        with pytest.raises(SchemaError, match="'f'"):
            expand_values(bad, 4, p, "f")
    with pytest.raises(SchemaError, match="empty here"):
        expand_values("4..ncpu", 2, p, "f")  # a range this machine makes empty


def test_point_matches():
    p = {"n": 30, "cutoff": 0}
    assert point_matches(p, {"cutoff": 0, "n": {"gt": 20}})
    assert not point_matches(p, {"cutoff": 0, "n": {"gt": 20, "lt": 30}})
    assert point_matches(p, {"n": [25, 30], "alternatives": ["x"], "reason": "r"})
    assert not point_matches(p, {"n": [25]})
    assert point_matches(p, {"n": {"ge": 30, "le": 30}})
    assert point_matches(p, {})


MINI = """
[experiment]
kind = "tool"
[tool]
list_runtimes = ["{bin}/t", "--list"]
[[tool.variants]]
label = "a"
runtime = "ra"
argv = ["{bin}/t", "{n}", "{workers}"]
[[tool.variants]]
label = "b"
argv = ["{bin}/t", "{n}", "{workers}"]
[sweep]
n = [1, 2, 3]
workers = "1..ncpu"
[run]
cpus_from = "workers"
"""


def mini(tmp_path, text=MINI, ncpu=2):
    f = tmp_path / "m.toml"
    f.write_text(text)
    return load_experiment(f, ncpu=ncpu)


@pytest.mark.parametrize("extra, field", [
    ('[[exclude]]\nm = 1\n', "exclude[0].m"),
    ('[[exclude]]\nn = { above = 1 }\n', "exclude[0].n"),
    ('[[exclude]]\nalternatives = ["zz"]\n', "exclude[0].alternatives"),
    ('[[report.figures]]\nx = "n"\n', "report.figures[0].metric"),
    ('[[report.figures]]\nmetric = "t"\nx = "q"\n', "report.figures[0].x"),
    ('[[report.figures]]\nmetric = "t"\nwhere = { q = 1 }\n', "report.figures[0].where.q"),
    ('[[report.figures]]\nmetric = "t"\ncolour = "red"\n', "report.figures[0].colour"),
    ('[suites.quick]\nexclude = [{ q = 1 }]\n', "suites.quick.exclude[0].q"),
])
def test_schema_errors_name_the_field(tmp_path, extra, field):
    with pytest.raises(SchemaError, match=re.escape(field)):
        mini(tmp_path, MINI + extra)


def test_cpus_from_and_runtime_need_their_context(tmp_path):
    with pytest.raises(SchemaError, match="run.cpus_from"):
        mini(tmp_path, MINI.replace('cpus_from = "workers"', 'cpus_from = "n2"'))
    with pytest.raises(SchemaError, match="tool.list_runtimes"):
        mini(tmp_path, MINI.replace('list_runtimes = ["{bin}/t", "--list"]\n', ""))
    with pytest.raises(SchemaError, match=r"tool.variants\[0\].runtimes"):
        mini(tmp_path, MINI.replace('runtime = "ra"', 'runtimes = "ra"'))


def test_exclusions_and_estimate(tmp_path):
    e = mini(tmp_path, MINI + '[[exclude]]\nalternatives = ["a"]\nn = { ge = 2 }\n'
             '[suites.quick]\nexclude = [{ workers = 2 }]\n')
    runs = [(a.label, p["n"], p["workers"]) for a, p in e.runs()]
    assert ("a", 2, 1) not in runs and ("a", 1, 2) in runs and ("b", 3, 2) in runs
    assert len(runs) == 3 * 2 * 2 - 4
    assert e.estimate_seconds() == len(runs) * e.repetitions * e.trial_seconds()
    q = e.for_suite("quick")
    assert sorted(runs_q := [(a.label, p["n"]) for a, p in q.runs()]) == \
        [("a", 1), ("b", 1), ("b", 2), ("b", 3)], runs_q
    assert len(e.exclude) == 1  # the suite's exclusion is the copy's


# ---- skipping unavailable runtimes --------------------------------------------------------

def fake_tool(tmp_path, listing: str, rc: int = 0) -> Path:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    t = d / "t"
    t.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\nexit {rc}\n")
    t.chmod(0o755)
    return d


@pytest.mark.parametrize("wrap", [False, True])
def test_unavailable_runtime_is_skipped_with_its_reason(tmp_path, wrap):
    rows = [{"name": "ra", "available": False, "reason": "libfoo is not installed"}]
    d = fake_tool(tmp_path, json.dumps({"tool": "t", "runtimes": rows} if wrap else rows))
    e = mini(tmp_path)
    said = []
    skipped = skip_unavailable_runtimes([e], d, said.append)
    assert [a.label for a in e.alternatives] == ["b"]  # the peer-like variant stays
    assert skipped == [{"experiment": "m", "alternative": "a", "runtime": "ra",
                        "reason": "libfoo is not installed"}]
    assert "libfoo" in said[0]


def test_runtime_missing_from_the_list_or_list_failing(tmp_path):
    d = fake_tool(tmp_path, json.dumps([{"name": "other", "available": True}]))
    e = mini(tmp_path)
    s = skip_unavailable_runtimes([e], d, lambda *_: None)
    assert s[0]["reason"].startswith("not among the runtimes the tool lists (other)")
    why, err = list_runtimes([str(tmp_path / "nothing-here"), "--list"])
    assert why == {} and "failed" in err
    e = mini(tmp_path)
    s = skip_unavailable_runtimes([e], tmp_path / "no-bin", lambda *_: None)
    assert [a.label for a in e.alternatives] == ["b"] and "failed" in s[0]["reason"]
    d = fake_tool(tmp_path, "[]", rc=3)
    assert "exit 3" in list_runtimes([str(d / "t")])[1]


# ---- the runner pins a tool to its workers' CPUs ------------------------------------------

@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_trial_pinned_to_workers_cpus(tmp_path):
    e = mini(tmp_path, MINI.replace('["{bin}/t", "{n}", "{workers}"]',
                                    f'["{sys.executable}", "-c", "import os, json; print(json.dumps('
                                    '{\\"cpus\\": len(os.sched_getaffinity(0)), \\"n\\": {n}}))"]'))
    allowed = sorted(os.sched_getaffinity(0))
    for w in (1, 2):
        rec = run_trial(Trial(e, e.alternatives[1], {"n": 3, "workers": w}, 0), tmp_path, 1)
        assert rec["status"] == "ok", rec["problems"]
        assert rec["metrics"]["cpus"] == w and rec["pinning"]["tool_cpus"] == allowed[:w]


# ---- the report ---------------------------------------------------------------------------

def trial(alt, n, cutoff, workers, rep, t1):
    """A yard-tasks-like result: time t1 on one worker, perfect speedup with a little noise."""
    tasks = {25: 242784, 30: 2 * 143}[n] if cutoff == 0 or n == 30 else 0
    t = t1 / workers * (1 + 0.01 * rep)
    return {"experiment": "eve_fib", "alternative": alt, "model": None, "rep": rep,
            "status": "ok", "problems": [], "retry": 0,
            "point": {"n": n, "cutoff": cutoff, "workers": workers, "repeat": 3},
            "metrics": {"min_s": t, "median_s": t * 1.1, "tasks": tasks, "n": n,
                        "ns_per_task": t * 1.1e9 / tasks, "workers": workers, "cutoff": cutoff}}


def test_report_draws_time_speedup_and_spawn_cost(tmp_path):
    e = load(ncpu=2).for_suite("quick")
    out = tmp_path / "r"
    raw = out / "raw" / "eve_fib"
    raw.mkdir(parents=True)
    alts = ["coro", "tbb", "go"]
    i = 0
    for a, base in zip(alts, (0.02, 0.015, 0.1)):
        for n, cutoff in ((25, 0), (30, 20)):
            for w in (1, 2):
                for rep in range(3):
                    (raw / f"{i}.json").write_text(json.dumps(trial(a, n, cutoff, w, rep, base)))
                    i += 1
    exp = {"name": "eve_fib", "title": e.title, "kind": "tool", "description": e.description,
           "path": "experiments/eve_fib.toml", "alternatives": alts, "sweep": e.sweep,
           "duration": 1, "warmup": 0, "repetitions": 3, "sample_interval": 0.5,
           "plots": e.plots, "baseline": "tbb", "baselines": ["tbb"], "log_y": False,
           "bars_at": None, "table": e.table, "pairs": e.pairs, "note": e.note,
           "figures": e.figures, "excluded": ["threads where cutoff = 0 and n > 20 (why)"]}
    meta = {"suite": "quick", "started": "now", "environment": {}, "models": [],
            "skipped": [{"experiment": "eve_fib", "alternative": "openmp", "runtime": "openmp",
                         "reason": "built without OpenMP"}],
            "experiments": [exp]}
    html = report.write_report(out, meta).read_text()
    section = html.split("<h2>" + e.title, 1)[1]
    # The three figures, and not the generic one besides.
    assert section.count("data:image/png;base64,") == 3
    for title in ("Time against workers", "Speedup T(1 worker)", "Spawn cost at cutoff 0"):
        assert f"alt='{title}" in section
    assert "Not run, by design: threads where cutoff = 0 and n &gt; 20 (why)" in section
    assert "runtime openmp: built without OpenMP" in section
    assert "runtime openmp: built without OpenMP" in html.split("<section id='exp-", 1)[0]
    # The table has the time and the spawn cost with CIs; the ratio to TBB is there.
    assert "<th>ns per task (median repetition)</th>" in section
    row = re.search(r"<tr><td>coro</td><td>n=25, cutoff=0, workers=1, repeat=3</td><td>([0-9.]+)",
                    section)
    assert row and float(row.group(1)) == pytest.approx(0.0202, rel=1e-3)
    assert "Ratios to tbb" in section
    assert "coro vs TBB" in section


def test_speedup_figure_needs_its_where(tmp_path):
    e = load(ncpu=2)
    trials = [trial("coro", 30, 20, w, r, 0.01) for w in (1, 2) for r in range(3)]
    exp = {"title": "t", "sweep": e.sweep, "alternatives": ["coro"]}
    assert report._figure_spec(exp, trials, e.figures[1])  # a PNG
    assert report._figure_spec(exp, trials, e.figures[2]) is None  # no cutoff 0 trial


# ---- end to end through the CLI, with a stand-in yard-tasks --------------------------------

FAKE_TASKS = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    a = sys.argv[1:]
    if a[:1] == ["--list-runtimes"]:
        print(json.dumps({{"tool": "yard-tasks", "runtimes": [
            {{"name": r, "available": r != "tbb", "reason": None if r != "tbb" else "no oneTBB here"}}
            for r in ("coro-perms", "coro", "threads", "openmp", "tbb")]}}))
        sys.exit(0)
    opt = dict(zip(a[2::2], a[3::2]))
    n, c = int(a[1]), int(opt["--cutoff"])
    def tasks(n): return 0 if n < 2 or n <= c else 2 + tasks(n - 1) + tasks(n - 2)
    x, y = 0, 1
    for _ in range(n): x, y = y, x + y
    t = tasks(n)
    print(json.dumps({{"tool": "yard-tasks", "program": "fib", "n": n, "runtime": opt["--runtime"],
        "workers": int(opt["--workers"]), "cutoff": c, "repeat": 3, "result": x, "expected": x,
        "correct": True, "times_s": [0.01] * 3, "min_s": 0.01, "median_s": 0.01,
        "wall_s": [0.011] * 3, "tasks": t, "steals": 1, "ns_per_task": 1e7 / t if t else None,
        "inline_fallbacks": 0, "cpus": len(os.sched_getaffinity(0))}}))
""")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the quick suite's 2 workers")
def test_quick_run_end_to_end(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "yard-tasks"
    tool.write_text(FAKE_TASKS.format(python=sys.executable))
    tool.chmod(0o755)
    res = tmp_path / "results"
    p = subprocess.run([sys.executable, "-m", "yard.cli", "--quiet", "--results-dir", str(res),
                        "--bin-dir", str(bin_dir), "run", str(EXP), "--suite", "quick"],
                       cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    latest = res / "latest"
    meta = json.loads((latest / "meta.json").read_text())
    assert meta["skipped"] == [{"experiment": "eve_fib", "alternative": "tbb", "runtime": "tbb",
                                "reason": "no oneTBB here"}]
    trials = [json.loads(f.read_text()) for f in (latest / "raw" / "eve_fib").glob("*.json")]
    mine = [t for t in trials if t["alternative"] in TASKS_RUNTIMES]
    assert {t["alternative"] for t in mine} == set(TASKS_RUNTIMES) - {"tbb"}
    # The fake's times never vary: each point stops at the minimum of 2, on its CI, against
    # coro (the reference, tbb, is skipped here: it runs as long as the others at its point,
    # the real peers included); threads not at cutoff 0.
    stops = {(s["alternative"], s["point"]): s for s in meta["stops"]}
    assert all(s["reference"] == "coro" for s in stops.values())
    fake = [s for (a, _), s in stops.items() if a in TASKS_RUNTIMES and a != "coro"]
    assert len(fake) == 3 * 4 - 2 and all(s["reason"] == "ci" and s["n"] == 2 for s in fake)
    assert 2 * (4 * 4 - 2) <= len(mine) <= 2 * (4 * 4 - 2) + 4
    for t in mine:
        assert t["status"] == "ok", t["problems"]
        w = t["point"]["workers"]
        assert t["metrics"]["cpus"] == w == len(t["pinning"]["tool_cpus"])
        assert t["commands"]["tool"][t["commands"]["tool"].index("--workers") + 1] == str(w)
    # The peers ran through their launchers (failed trials where they are not built).
    peers = [t for t in trials if t["alternative"] in ("go", "forkjoin")]
    assert 2 * 4 * 2 <= len(peers) <= 3 * 4 * 2
    for name, marker in (("go", "peers/go/bin/yard-peer-go"),
                         ("forkjoin", "peers/java/classes/.built")):
        if (REPO / marker).exists():
            bad = [t["problems"] for t in peers if t["alternative"] == name and t["status"] != "ok"]
            assert not bad, bad
    html = (latest / "report.html").read_text()
    assert "runtime tbb: no oneTBB here" in html
    assert html.count("data:image/png;base64,") >= 3


def test_eve_printed_trial_runs_program1_as_printed(monkeypatch):
    """The variant eve-printed end to end: the harness renders its argv and runs the paper's
    Program 1 (../shared/eve, beside the repository) through yard-eve call, and the record's
    numbers become the trial's metrics."""
    listing = REPO.parent / "shared" / "eve" / "program1.eve"
    yard_eve = BIN / "yard-eve"
    if not listing.is_file():
        pytest.skip(f"the paper's listing is not here: {listing.parent} is absent")
    if not os.access(yard_eve, os.X_OK):
        pytest.skip(f"{yard_eve} is not built")
    monkeypatch.chdir(REPO)  # the variant names the listing relative to the repository
    e = load(ncpu=2)
    alt = next(a for a in e.alternatives if a.label == "eve-printed")
    rec = run_trial(Trial(e, alt, {"n": 20, "cutoff": 0, "workers": 1, "repeat": 3}, 0),
                    yard_eve.parent, 0)
    assert rec["status"] == "ok" and rec["problems"] == [], rec
    m = rec["metrics"]
    assert (m["result"], m["repeat"], m["workers"]) == (6765, 3, 1)
    assert 0 < m["min_s"] <= m["median_s"]
