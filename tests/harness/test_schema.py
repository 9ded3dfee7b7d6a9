from pathlib import Path

import pytest

import harness_paths  # noqa: F401
from yard.experiment import SchemaError, load_all, load_experiment, render

from harness_paths import REPO

GOOD = """
[experiment]
name = "t"
[servers]
app = "echo"
models = ["fork", "epoll"]
[load]
argv = ["{bin}/yard-load", "echo", "--target", "{target}", "--connections", "{connections}"]
[sweep]
connections = [1, 2]
[run]
duration = 2
repetitions = 3
[suites.smoke]
duration = 1
repetitions = 1
sweep = { connections = [1] }
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "x.toml"
    p.write_text(text)
    return p


def test_good_file_and_suite_override(tmp_path):
    e = load_experiment(write(tmp_path, GOOD))
    assert [a.label for a in e.alternatives] == ["fork", "epoll"]
    assert e.alternatives[0].argv[:5] == ["{bin}/yard-serve", "--app", "echo", "--model", "fork"]
    assert len(e.points()) == 2 and e.repetitions == 3
    s = e.for_suite("smoke")
    assert (s.duration, s.repetitions, s.points()) == (1, 1, [{"connections": 1}])
    assert e.in_suite("smoke") and e.in_suite("quick")


def test_models_all_expands_from_the_server_list(tmp_path):
    e = load_experiment(write(tmp_path, GOOD.replace('["fork", "epoll"]', '"all"')),
                        models=["fork", "thread", "coro"])
    assert [a.label for a in e.alternatives] == ["fork", "thread", "coro"]


@pytest.mark.parametrize("old,new,field", [
    ('duration = 2', 'duration = "two"', "run.duration"),
    ('duration = 2', 'duration = -1', "run.duration"),
    ('repetitions = 3', 'repetitions = 0', "run.repetitions"),
    ('"{target}", ', '', "load.argv"),
    ('[run]', '[run]\nbogus = 1', "run.bogus"),
    ('app = "echo"\n', '', "servers.app"),
    ('connections = [1, 2]', 'connections = []', "sweep.connections"),
    ('[suites.smoke]', '[suites.nightly]', "suites.nightly"),
    ('sweep = { connections = [1] }', 'sweep = { threads = [1] }', "suites.smoke.sweep.threads"),
    ('[experiment]\nname = "t"', '[experiment]\nname = "t"\nkind = "magic"', "experiment.kind"),
    ('[experiment]\nname = "t"', '[experimnt]\nname = "t"', "experimnt"),
    ('"{connections}"]', '"{conections}"]', "load.argv"),
    ('[suites.smoke]', '[report]\nlog_y = "yes"\n[suites.smoke]', "report.log_y"),
    ('[suites.smoke]', '[report]\nbars_at = { threads = 1 }\n[suites.smoke]', "report.bars_at.threads"),
    ('[suites.smoke]', '[report]\nbars_at = { connections = 7 }\n[suites.smoke]',
     "report.bars_at.connections"),
    ('[suites.smoke]', '[report]\ntable = "all"\n[suites.smoke]', "report.table"),
    ('[suites.smoke]', '[report]\nplot = ["x"]\n[suites.smoke]', "report.plot"),
])
def test_bad_files_name_the_field(tmp_path, old, new, field):
    assert old in GOOD
    with pytest.raises(SchemaError) as ei:
        load_experiment(write(tmp_path, GOOD.replace(old, new, 1)))
    assert f"'{field}'" in str(ei.value)
    assert str(tmp_path) in str(ei.value)


def test_invalid_toml(tmp_path):
    with pytest.raises(SchemaError, match="not valid TOML"):
        load_experiment(write(tmp_path, "[experiment\n"))


def test_tool_experiment(tmp_path):
    e = load_experiment(write(tmp_path, '[experiment]\nkind = "tool"\n[tool]\n'
                                        'argv = ["{bin}/yard-cswitch", "--json"]\n'))
    assert e.kind == "tool" and e.alternatives[0].argv[-1] == "--json"


def test_report_options(tmp_path):
    e = load_experiment(write(tmp_path, GOOD.replace(
        "[suites.smoke]", '[report]\nlog_y = true\nbars_at = { connections = 2 }\n'
        'table = ["throughput_per_s"]\n[suites.smoke]')))
    assert e.log_y and e.bars_at == {"connections": 2} and e.table == ["throughput_per_s"]
    plain = load_experiment(write(tmp_path, GOOD))
    assert not plain.log_y and plain.bars_at is None and plain.table == []


def test_render_placeholders():
    assert render(["--x", "{a}", "{d}s"], {"a": 3, "d": 2.0}) == ["--x", "3", "2s"]
    with pytest.raises(SchemaError, match="unknown placeholder {nope}"):
        render(["{nope}"], {"a": 1})
    # Braces that are not a {name} placeholder stay as they are (e.g. inline JSON or code).
    assert render(["{'k': {a}}"], {"a": 1}) == ["{'k': 1}"]


def test_repository_experiments_load():
    exps = load_all(REPO / "experiments", models=["fork", "thread", "epoll"])
    names = {e.name for e in exps}
    assert {"papaya_cpu", "eve_echo", "eve_counter", "cswitch"} <= names
    assert any(e.in_suite("smoke") for e in exps)
