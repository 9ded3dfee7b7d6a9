"""The harness's verdicts on a trial: a saturated generator (invalid only when the server had
room), and a server CPU that could not be measured."""

from yard.runner import SERVER_BUSY_PCT, _judge_generator, _metrics


def trial(server_pct, *, saturated=True, behind=False, gen=97.0):
    lj = {"invalid": saturated or behind, "generator_saturated": saturated,
          "behind_schedule": behind, "generator_cpu_pct": gen, "behind_schedule_max_ms": 40.0}
    metrics = {} if server_pct is None else {"cpu_pct_total": server_pct}
    return {"status": "ok", "problems": [], "load": {"stdout_json": lj}, "metrics": metrics}


def test_both_at_their_limit_counts_and_is_marked():
    rec = trial(97.5)
    _judge_generator(rec, 1)
    assert rec["status"] == "ok" and rec["problems"] == []
    assert rec["saturated"] == {"server_cpu_pct": 97.5, "generator_cpu_pct": 97.0}


def test_a_server_with_room_makes_it_invalid():
    rec = trial(SERVER_BUSY_PCT - 1)
    _judge_generator(rec, 1)
    assert rec["status"] == "invalid" and "saturated" not in rec
    assert "server used 89% of its 1 core(s)" in rec["problems"][0]


def test_the_limit_scales_with_the_server_cores():
    rec = trial(150.0)  # one and a half cores of two: room left
    _judge_generator(rec, 2)
    assert rec["status"] == "invalid"
    rec = trial(190.0)
    _judge_generator(rec, 2)
    assert rec["status"] == "ok" and rec["saturated"]["server_cpu_pct"] == 190.0


def test_behind_schedule_is_invalid_whatever_the_server_did():
    rec = trial(99.0, saturated=False, behind=True)
    _judge_generator(rec, 1)
    assert rec["status"] == "invalid" and "behind its schedule by 40.0 ms" in rec["problems"][0]


def test_no_server_measurement_means_invalid():
    rec = trial(None)
    _judge_generator(rec, 1)
    assert rec["status"] == "invalid" and "not measured" in rec["problems"][0]


def test_a_valid_generator_or_a_failed_trial_is_left_alone():
    rec = trial(50.0, saturated=False)
    _judge_generator(rec, 1)
    assert rec["status"] == "ok" and "saturated" not in rec
    rec = trial(50.0)
    rec["status"] = "failed"
    _judge_generator(rec, 1)
    assert rec["status"] == "failed" and rec["problems"] == []


PROC_GROUP = {"kind": "proc", "exact_cpu": False, "note": "no cgroup could be made (test)"}


def test_a_zero_from_the_proc_walk_is_no_figure_and_says_why():
    rec = {"cgroup": PROC_GROUP, "totals": {"wall_s": 2.0, "cpu_s": 0.0},
           "load": {"stdout_json": {"messages": 1000}}}
    m = _metrics(rec)
    assert "cpu_s" not in m and "cpu_pct_total" not in m and "cpu_us_per_msg" not in m
    assert "could not be measured" in rec["cpu_unmeasured"]
    assert "no cgroup could be made (test)" in rec["cpu_unmeasured"]


def test_a_cgroups_zero_and_the_walks_nonzero_are_figures():
    for cg, cpu in ((PROC_GROUP, 0.2), ({"kind": "v1", "exact_cpu": True}, 0.0)):
        rec = {"cgroup": cg, "totals": {"wall_s": 2.0, "cpu_s": cpu}}
        assert _metrics(rec)["cpu_s"] == cpu and "cpu_unmeasured" not in rec
