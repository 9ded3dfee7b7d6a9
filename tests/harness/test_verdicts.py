"""Verdicts first (issue 41): the report opens with one row per experiment (best, worst, their
ratio with its CI, lower-bound marks) and a models x workloads heat-map, before the feature
table; the long tables fold under their plots. Synthetic trials here; test_report_first_screen
builds one from a real run and looks at it in headless Chromium."""

import json
import re
from pathlib import Path

import harness_paths  # noqa: F401  (puts python/ on sys.path)

from yard import report


def _trial(exp, alt, point, rep, metrics, status="ok", **extra):
    return {"experiment": exp, "alternative": alt, "model": alt, "rep": rep, "status": status,
            "point": point, "problems": [], "metrics": metrics, **extra}


def _exp(name, alts, sweep, plots, **kw):
    e = {"name": name, "title": name.title(), "kind": "server", "description": "",
         "path": f"experiments/{name}.toml", "alternatives": alts, "sweep": sweep,
         "duration": 1, "warmup": 0, "repetitions": 3, "sample_interval": 0.5, "plots": plots,
         "baseline": alts[0], "baselines": [alts[0]], "pairs": [], "note": "", "table": plots}
    e.update(kw)
    return e


def _write(out: Path, trials):
    raw = out / "raw"
    for i, t in enumerate(trials):
        d = raw / t["experiment"]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i}.json").write_text(json.dumps(t))


def _run(tmp_path):
    out = tmp_path / "r"
    rate = {"epoll": 1000.0, "coro": 900.0, "fork": 250.0, "go": 800.0}
    cost = {"epoll": 10.0, "coro": 12.0, "fork": 40.0, "go": 20.0}
    trials = []
    for rep in range(3):
        for a, v in rate.items():
            for c in (10, 100):
                # At 10 connections fork is the best: the verdict ranks at the last point.
                tv = v * (1 + 0.01 * rep) * (5 if c == 10 and a == "fork" else 1)
                trials.append(_trial("echo", a, {"connections": c}, rep,
                                     {"throughput_per_s": tv}))
            trials.append(_trial("rest", a, {"users": 50}, rep,
                                 {"latency_p50_us": cost[a] * (1 + 0.01 * rep)}))
    # Go's echo at 100 connections: generator-invalid trials only, so the ratio is a bound.
    trials = [t for t in trials if not (t["experiment"] == "echo" and t["alternative"] == "fork"
                                        and t["point"]["connections"] == 100)]
    trials += [_trial("echo", "fork", {"connections": 100}, r, {"throughput_per_s": 250.0 + r},
                      status="invalid") for r in range(2)]
    _write(out, trials)
    exps = [_exp("echo", list(rate), {"connections": [10, 100]}, ["throughput_per_s"],
                 question="which model echoes fastest?", metric="throughput_per_s"),
            _exp("rest", list(cost), {"users": [50]}, ["latency_p50_us"],
                 question="which serves REST with the lowest p50?"),
            _exp("empty", ["epoll"], {}, ["throughput_per_s"])]
    models = [{"name": n, "summary": n, "traits": {"event_based": True}}
              for n in ("fork", "epoll", "coro")]
    meta = {"suite": "quick", "started": "now", "environment": {}, "models": models,
            "experiments": exps, "skipped": [{"experiment": "rest", "alternative": "uring",
                                              "model": "uring", "reason": "no io_uring"}],
            "dropped": [],
            "stops": [{"experiment": "echo", "alternative": a, "point": f"connections={c}",
                       "metric": "throughput_per_s", "reference": "epoll", "done": True,
                       "reason": "ci" if a != "go" else "max", "n": 3, "half_width": 0.01,
                       "text": "3 trials: CI ±1.0% within ±5%"}
                      for a in rate for c in (10, 100)]}
    return out, meta


def test_verdict_rows_name_best_worst_ratio_and_marks(tmp_path):
    out, meta = _run(tmp_path)
    vs = {v["experiment"]: v for v in report.verdicts(meta, report.load_trials(out))}
    echo = vs["echo"]
    assert echo["point"] == "connections=100"
    assert (echo["best"], echo["worst"]) == ("epoll", "fork")
    # A rate: best / worst = 1010 / 250.5 or so, with a CI around it.
    assert 3.8 < echo["ratio"].median < 4.2 and echo["ratio"].lo <= echo["ratio"].median
    assert echo["bound"] == "<=" and any("generator-bound (fork)" in m for m in echo["marks"])
    assert echo["trials"] == 24 and echo["at_max"] == 2
    rest = vs["rest"]
    # A cost: worst / best = fork's 40 / epoll's 10.
    assert (rest["best"], rest["worst"]) == ("epoll", "fork") and rest["lower_better"]
    assert 3.9 < rest["ratio"].median < 4.1 and rest["bound"] == "" and rest["partial"]
    assert any("skipped here: uring" in m for m in rest["marks"])
    assert "best" not in vs["empty"]
    lines = report.verdict_lines(out, meta)
    assert len(lines) == 3
    assert lines[0].startswith("echo: which model echoes fastest?: best epoll, worst fork, <= ")
    # Our best model against the best peer (issue 43): above 1 when ours is ahead, a rate as
    # ours / the peer's (1010 / 808), a cost as the peer's / ours (20 / 10).
    assert (echo["ours"], echo["peer"]) == ("epoll", "go")
    assert 1.2 < echo["ours_vs_peer"].median < 1.3 and echo["ours_vs_peer_bound"] == ""
    assert (rest["ours"], rest["peer"]) == ("epoll", "go")
    assert 1.95 < rest["ours_vs_peer"].median < 2.05
    assert "; our best epoll against the best peer go: 1.2" in lines[0]
    assert "ours" not in vs["empty"]


def test_which_alternatives_are_ours_and_which_are_peers():
    models = ["fork", "thread", "epoll", "reactors", "coro", "uring"]
    side = {a: report.alternative_side(a, models) for a in (
        "epoll", "fork-pair", "coro-perms", "epoll+tls", "epoll+fib35", "eve", "eve-printed",
        "go", "go+tls", "go-papaya", "node-cluster+tls", "rust-tokio", "rust-monoio", "erlang",
        "elixir", "openmp", "tbb", "forkjoin", "threads", "process-pipe", "ucontext")}
    assert [a for a, s in side.items() if s == "ours"] == [
        "epoll", "fork-pair", "coro-perms", "epoll+tls", "epoll+fib35", "eve", "eve-printed"]
    assert [a for a, s in side.items() if s is None] == ["threads", "process-pipe", "ucontext"]


def test_a_generator_bound_figure_bounds_the_ratio_the_same_way_for_rates_and_costs():
    """A generator-bound figure is one the server could better (a higher rate, a lower cost):
    the better alternative's makes its lead a lower bound, the other's an upper bound."""
    assert report._bound_mark(True, False) == ">="
    assert report._bound_mark(False, True) == "<="
    assert report._bound_mark(True, True) == "?" and report._bound_mark(False, False) == ""


def test_a_peer_ahead_of_every_model_gives_a_ratio_below_1(tmp_path):
    out = tmp_path / "r"
    trials = [_trial("rest", a, {"users": 50}, rep, {"latency_p50_us": v * (1 + 0.01 * rep)},
                     **({"saturated": True} if a == "go" else {}))
              for rep in range(3) for a, v in (("epoll", 30.0), ("fork", 40.0), ("go", 20.0))]
    _write(out, trials)
    meta = {"experiments": [_exp("rest", ["epoll", "fork", "go"], {"users": [50]},
                                 ["latency_p50_us"])],
            "models": [{"name": n} for n in ("fork", "epoll")]}
    v = report.verdicts(meta, report.load_trials(out))[0]
    assert (v["best"], v["ours"], v["peer"]) == ("go", "epoll", "go")
    # 20 / 30: the peer is ahead; its figure was generator-bound (its latency could be lower
    # still), so ours' standing is at most that.
    assert 0.6 < v["ours_vs_peer"].median < 0.7 and v["ours_vs_peer_bound"] == "<="
    assert v["bound"] == ">="  # go leads fork by at least 40 / 20
    assert "; our best epoll against the best peer go: <= 0.6" in report.verdict_text(v)


def test_the_report_opens_on_the_verdicts_and_the_heat_map(tmp_path):
    out, meta = _run(tmp_path)
    html = report.write_report(out, meta).read_text()
    body = html.split("<body>", 1)[1]
    # The verdict section is the first section, before the feature table and the experiments.
    assert body.index("<section id='verdicts'>") < body.index("<h2>The models</h2>") \
        < body.index("<section id='exp-echo'>")
    assert body.index("<section id='verdicts'>") == body.index("<section")
    verdict = body.split("<section id='verdicts'>", 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr class='verdict-row' data-experiment='([^']+)'>", verdict)
    assert rows == ["echo", "rest", "empty"]
    assert "≤ an upper bound" in verdict and "† not every alternative" in verdict
    # Heat-map: a row per model and peer measured, a column per experiment ranked; each cell
    # the ratio to the column's best, coloured, its CI in the tooltip.
    heat = verdict.split("<table class='heatmap'>", 1)[1].split("</table>", 1)[0]
    assert [r for r in re.findall(r"<tr><td><b>([^<]+)</b>", heat)] == ["fork", "epoll", "coro", "go"]
    cells = re.findall(r"<td class='heat' style='background:hsl\((\d+),[^']*' title='([^']*)'>"
                       r"([0-9.]+)(\*?)<br>", heat)
    assert len(cells) == 8
    best = [c for c in cells if c[2] == "1.00"]
    assert len(best) == 2 and all(c[0] == "120" for c in best)  # green
    fork_echo = next(c for c in cells if c[1].startswith("fork, echo"))
    assert fork_echo[3] == "*" and int(fork_echo[0]) < 30  # red-ish, flagged
    assert "[" in fork_echo[1] and "the best (epoll)" in fork_echo[1]
    # The long tables fold under the plots; the stopping reasons are there per point.
    section = body.split("<section id='exp-echo'>", 1)[1].split("</section>", 1)[0]
    assert section.index("data:image/png;base64,") < section.index("<details><summary>Table")
    assert "<details><summary>Trials per point and why they stopped (24 trials; 6 ci, 2 max)" \
        in section
    # Self-contained: nothing fetched from a network.
    assert not re.search(r"(src|href)=['\"]https?:", html)
