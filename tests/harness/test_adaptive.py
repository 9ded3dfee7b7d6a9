"""Adaptive repetitions (issue 41): the stopping rule on synthetic data, and the plan that
runs rounds of the points still open, interleaved, until each one stops."""

import random
from pathlib import Path

import harness_paths  # noqa: F401  (puts python/ on sys.path)
import numpy as np
import pytest

from yard.experiment import SchemaError, load_experiment
from yard.runner import AdaptivePlan
from yard.stats import relative_half_width, ratio_ci, stop_rule

EXP = """
[experiment]
name = "t"
question = "which is fastest?"
[servers]
app = "echo"
models = ["epoll", "fork", "thread"]
[load]
argv = ["{bin}/yard-load", "{target}"]
[sweep]
connections = [1, 8]
[run]
duration = 1
repetitions = 2
max_repetitions = 6
ci_width = 0.05
[report]
baseline = "epoll"
plots = ["throughput_per_s"]
[suites.quick]
repetitions = 1
max_repetitions = 3
ci_width = 0.1
"""


def test_tight_values_stop_at_the_minimum_with_the_ci_as_reason():
    a = [100.0, 100.5, 99.8]
    ref = [50.0, 50.2, 49.9]
    st = stop_rule(a, ref, trials=3, min_trials=3, max_trials=10, width=0.05)
    assert st.done and st.reason == "ci" and st.n == 3
    assert st.half_width <= 0.05 and "within ±5%" in st.text


def test_the_minimum_holds_even_when_the_ci_is_narrow():
    st = stop_rule([100.0, 100.1], [50.0, 50.0], trials=2, min_trials=3, max_trials=10)
    assert not st.done and st.reason == ""


def test_noisy_values_run_to_the_maximum():
    rng = np.random.default_rng(7)
    a = list(rng.normal(100, 30, 5))
    ref = list(rng.normal(50, 15, 5))
    assert not stop_rule(a, ref, trials=5, min_trials=2, max_trials=6).done
    st = stop_rule(a + [100.0], ref, trials=6, min_trials=2, max_trials=6)
    assert st.done and st.reason == "max" and "the maximum" in st.text
    assert st.half_width > 0.05


def test_a_wider_target_stops_sooner():
    rng = np.random.default_rng(3)
    a = list(rng.normal(100, 6, 4))
    ref = list(rng.normal(100, 6, 4))
    hw = relative_half_width(ratio_ci(a, ref))
    assert 0.02 < hw < 0.3
    assert not stop_rule(a, ref, 4, 2, 10, width=hw * 0.9).done
    assert stop_rule(a, ref, 4, 2, 10, width=hw * 1.1).reason == "ci"


def test_failed_trials_count_toward_the_maximum():
    # Trials that measured nothing: no CI ever, so the point stops at the maximum, not never.
    assert not stop_rule([], [1.0, 1.0], trials=2, min_trials=1, max_trials=3).done
    assert stop_rule([], [1.0, 1.0], trials=3, min_trials=1, max_trials=3).reason == "max"
    # One value has no CI however close it is.
    assert not stop_rule([1.0], [1.0, 1.0], trials=1, min_trials=1, max_trials=3).done


def test_a_fixed_count_says_so():
    # max = min: no room to adapt; one trial stops at once, as a fixed count, not "the maximum".
    st = stop_rule([5.0], [4.0], trials=1, min_trials=1, max_trials=1)
    assert st.done and st.reason == "fixed" and "fixed count" in st.text


def test_the_reference_alone_uses_its_own_median_ci():
    st = stop_rule([10.0, 10.01, 9.99], None, trials=3, min_trials=2, max_trials=5)
    assert st.done and st.reason == "ci"


def _exp(tmp_path: Path, text: str = EXP):
    p = tmp_path / "t.toml"
    p.write_text(text)
    return load_experiment(p, ["epoll", "fork", "thread"])


def test_schema_takes_the_adaptive_fields_and_the_suite_overrides(tmp_path):
    e = _exp(tmp_path)
    assert (e.repetitions, e.max_reps(), e.ci_width) == (2, 6, 0.05)
    assert e.question == "which is fastest?" and e.watched_metric() == "throughput_per_s"
    assert e.reference() == "epoll"
    q = e.for_suite("quick")
    assert (q.repetitions, q.max_reps(), q.ci_width) == (1, 3, 0.1)
    with pytest.raises(SchemaError, match="run.max_repetitions"):
        _exp(tmp_path, EXP.replace("max_repetitions = 6", "max_repetitions = 1"))
    with pytest.raises(SchemaError, match="run.ci_width"):
        _exp(tmp_path, EXP.replace("ci_width = 0.05", "ci_width = 5.0"))
    # Without max_repetitions the count is fixed, as before.
    fixed = _exp(tmp_path, EXP.replace("max_repetitions = 6\n", ""))
    assert fixed.max_reps() == fixed.repetitions == 2


def _simulate(plan: AdaptivePlan, noise: dict[str, float]):
    """Run the plan against fake trials: throughput 1000 times 1 + noise x (1, -1, 0.5, -0.5,
    ...) for the alternative's relative noise, so a noisy point never has two trials that
    agree by chance; returns the trials in the order run."""
    pattern = [1.0, -1.0, 0.5, -0.5, 0.8, -0.8, 0.3, -0.3]
    order = []
    while not plan.finished():
        block = plan.next_round()
        assert block, "an unfinished plan must have a trial to run"
        for t in block:
            order.append(t)
            v = 1000.0 * (1 + noise[t.alt.label] * pattern[t.rep % len(pattern)])
            plan.record(t, {"status": "ok", "metrics": {"throughput_per_s": v}})
        plan.close()
    return order


def test_plan_stops_quiet_points_early_and_noisy_ones_at_the_maximum(tmp_path):
    e = _exp(tmp_path)
    plan = AdaptivePlan(e, random.Random(1))
    order = _simulate(plan, {"epoll": 0.002, "fork": 0.002, "thread": 0.5})
    stops = {(s["alternative"], s["point"]): s for s in plan.summary()}
    for pk in ("connections=1", "connections=8"):
        assert stops[("fork", pk)]["reason"] == "ci" and stops[("fork", pk)]["n"] == 2
        assert stops[("thread", pk)]["reason"] == "max" and stops[("thread", pk)]["n"] == 6
        # The reference runs as long as another alternative at its point does.
        assert stops[("epoll", pk)]["reason"] == "reference" and stops[("epoll", pk)]["n"] == 6
    assert len(order) == plan.trials_done() == 2 * (2 + 6 + 6)
    # Interleaved: every round holds each open (alternative, point) once; the first round all.
    first = order[:6]
    assert {(t.alt.label, t.point["connections"]) for t in first} == {
        (a, c) for a in ("epoll", "fork", "thread") for c in (1, 8)}
    # Repetition numbers count up per (alternative, point).
    reps = [t.rep for t in order if t.alt.label == "thread" and t.point["connections"] == 8]
    assert reps == list(range(6))


def test_plan_without_a_maximum_runs_the_fixed_count(tmp_path):
    e = _exp(tmp_path, EXP.replace("max_repetitions = 6\n", ""))
    plan = AdaptivePlan(e, random.Random(2))
    order = _simulate(plan, {"epoll": 0.5, "fork": 0.5, "thread": 0.5})
    assert len(order) == 2 * 3 * 2
    assert all(s["n"] == 2 for s in plan.summary())
    assert {s["reason"] for s in plan.summary() if s["alternative"] != "epoll"} == {"fixed"}


def test_plan_estimates_what_is_left(tmp_path):
    plan = AdaptivePlan(_exp(tmp_path), random.Random(3))
    assert plan.trials_left_min() == 6 * 2 and plan.trials_max() == 6 * 6
    plan.close()
    _simulate(plan, {"epoll": 0.001, "fork": 0.001, "thread": 0.001})
    assert plan.trials_left_min() == 0 and plan.finished()
