"""The server_cpus sweep: which models follow the count, where server and load run, and
which counts a machine drops (with why)."""

import pytest

import harness_paths  # noqa: F401
from yard.experiment import SchemaError, load_experiment

SWEEP = """
[experiment]
name = "s"
[servers]
app = "echo"
models = "all"
[[servers.extra]]
label = "go"
argv = ["peers/go/run", "--listen", "127.0.0.1:0", "--cluster", "{server_cpus}"]
[load]
argv = ["{bin}/yard-load", "echo", "--target", "{target}", "--threads", "{load_threads}"]
[sweep]
server_cpus = [1, 2, 4, 8]
[run]
repetitions = 1
[suites.quick]
skip = true
"""
MODELS = [{"name": "epoll", "flags": {"workers": False}},
          {"name": "reactors", "flags": {"workers": True}},
          {"name": "thread", "flags": {"workers": False}}]


def load(tmp_path, text=SWEEP):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return load_experiment(p, MODELS)


def test_multi_loop_models_follow_the_count_the_others_are_pinned(tmp_path):
    e = load(tmp_path)
    argv = {a.label: a.argv for a in e.alternatives}
    assert argv["reactors"][-2:] == ["--workers", "{server_cpus}"]
    assert "--workers" not in argv["epoll"] and "--workers" not in argv["thread"]
    assert argv["go"][-2:] == ["--cluster", "{server_cpus}"]  # a peer says how itself


def test_placement_gives_the_server_the_first_n_and_the_load_the_rest(tmp_path):
    e = load(tmp_path)
    allowed = set(range(8))
    assert e.placement({"server_cpus": 1}, allowed) == ({0}, set(range(1, 8)))
    assert e.placement({"server_cpus": 6}, allowed) == (set(range(6)), {6, 7})
    # Without the sweep, the [run] lists as far as they are allowed.
    e.sweep = {}
    assert e.placement({}, {0, 1}) == ({0}, {1})


def test_counts_beyond_the_machine_are_dropped_with_the_reason(tmp_path):
    e = load(tmp_path)
    dropped = e.drop_cpu_points(4)
    assert e.sweep["server_cpus"] == [1, 2]
    assert dropped[0]["server_cpus"] == [4, 8]
    assert "4 CPU(s) here, 1 kept for the load generator, so at most 3" in dropped[0]["reason"]
    assert [p["server_cpus"] for p in e.points()] == [1, 2]


def test_no_reserve_lets_the_server_take_every_cpu(tmp_path):
    e = load(tmp_path, SWEEP.replace("repetitions = 1", "repetitions = 1\nload_reserve = 0"))
    assert e.drop_cpu_points(8) == [] and e.sweep["server_cpus"] == [1, 2, 4, 8]


def test_a_suite_can_leave_the_experiment_out(tmp_path):
    e = load(tmp_path)
    assert not e.in_suite("quick") and e.in_suite("full")


@pytest.mark.parametrize("bad", ["[0, 1]", '["two"]', "[true]"])
def test_counts_must_be_positive_integers(tmp_path, bad):
    with pytest.raises(SchemaError, match="sweep.server_cpus"):
        load(tmp_path, SWEEP.replace("[1, 2, 4, 8]", bad))
