"""Issue 20's harness parts: report.baseline as a list (a ratio table per baseline),
report.pairs (named pairings side by side), report.note, and reads_per_s from the server's
read(2) count (/proc/PID/io syscr), which must survive the fork model's children exiting at
the end of a run."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness_paths  # noqa: F401
from yard import report
from yard.cgroup import make_group
from yard.experiment import SchemaError, load_experiment
from yard.runner import _metrics
from yard.sampler import Sampler

from harness_paths import REPO

BASE = """
[experiment]
name = "p"
[servers]
app = "sink"
models = ["fork", "epoll"]
[[servers.extra]]
label = "go"
argv = ["peers/go/run", "--app", "sink", "--listen", "127.0.0.1:0"]
[[servers.extra]]
label = "go-papaya"
argv = ["peers/go/run", "--app", "sink", "--print", "--listen", "127.0.0.1:0"]
[load]
argv = ["{bin}/yard-load", "rate", "--target", "{target}", "--connections", "{connections}"]
[sweep]
connections = [16, 64]
[report]
plots = ["cpu_mean_pct"]
baseline = ["go", "go-papaya"]
note = "First paragraph.\\n\\nSecond one."
[[report.pairs]]
label = "the study's pairing"
alternative = "fork"
baseline = "go-papaya"
[[report.pairs]]
label = "the fair pairing"
alternative = "epoll"
baseline = "go"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "x.toml"
    p.write_text(text)
    return p


def test_baseline_list_pairs_and_note_load(tmp_path):
    e = load_experiment(write(tmp_path, BASE))
    assert e.baseline == "go" and e.baselines == ["go", "go-papaya"]
    assert [p["label"] for p in e.pairs] == ["the study's pairing", "the fair pairing"]
    assert e.note.startswith("First paragraph.")


def test_a_single_baseline_still_works(tmp_path):
    e = load_experiment(write(tmp_path, BASE.replace('baseline = ["go", "go-papaya"]',
                                                     'baseline = "fork"')))
    assert e.baseline == "fork" and e.baselines == ["fork"]


@pytest.mark.parametrize("old, new, field", [
    ('baseline = ["go", "go-papaya"]', 'baseline = ["go", "rust"]', "report.baseline"),
    ('baseline = ["go", "go-papaya"]', 'baseline = []', "report.baseline"),
    ('alternative = "fork"', 'alternative = "java"', "report.pairs[0].alternative"),
    ('baseline = "go"\n', 'baseline = "c"\n', "report.pairs[1].baseline"),
    ('label = "the fair pairing"\n', '', "report.pairs[1].label"),
    ('label = "the fair pairing"\n', 'label = "f"\nwhy = 1\n', "report.pairs[1].why"),
    ('note = "First', 'notes = "First', "report.notes"),
])
def test_bad_report_fields_are_named(tmp_path, old, new, field):
    assert old in BASE
    with pytest.raises(SchemaError) as ei:
        load_experiment(write(tmp_path, BASE.replace(old, new, 1)))
    assert f"field '{field}'" in str(ei.value)


def test_the_repository_papaya_experiments_pair_as_the_issue_asks():
    models = ["fork", "thread", "epoll", "reactors", "coro", "uring"]
    cpu = load_experiment(REPO / "experiments" / "papaya_cpu.toml", models)
    sweep = load_experiment(REPO / "experiments" / "papaya_traffic.toml", models)
    for e in (cpu, sweep):
        labels = {a.label for a in e.alternatives}
        assert {"go", "go-papaya", "fork-papaya"} <= labels
        pairs = {(p["alternative"], p["baseline"]) for p in e.pairs}
        assert ("fork-papaya", "go-papaya") in pairs and ("fork", "go") in pairs
        papaya = next(a for a in e.alternatives if a.label == "go-papaya")
        assert "--print" in papaya.argv
        fork = next(a for a in e.alternatives if a.label == "fork-papaya")
        assert fork.argv[fork.argv.index("--flush") + 1] == "buffered"
    assert "--pacing" in cpu.load and cpu.load[cpu.load.index("--pacing") + 1] == "tcpkali"
    assert not cpu.for_suite("quick").skip
    assert sweep.sweep["write_size"] == [8, 64, 512, 4096, 65536]
    assert sweep.sweep["connections"] == [16, 64]
    assert not sweep.in_suite("quick") and sweep.in_suite("full")
    assert {"go", "go-papaya"} <= set(sweep.baselines)


def _trial(alt, conns, cpu, rep):
    return {"experiment": "p", "alternative": alt, "model": None, "rep": rep, "status": "ok",
            "point": {"connections": conns}, "problems": [],
            "metrics": {"cpu_mean_pct": cpu, "reads_per_s": 1000.0}}


def test_report_shows_pairs_side_by_side_a_table_per_baseline_and_the_note(tmp_path):
    out = tmp_path / "r"
    raw = out / "raw" / "p"
    raw.mkdir(parents=True)
    cpu = {"fork": 8.0, "epoll": 4.0, "go": 10.0, "go-papaya": 16.0}
    n = 0
    for alt, c in cpu.items():
        for conns in (16, 64):
            for rep in range(3):
                (raw / f"{n}.json").write_text(json.dumps(_trial(alt, conns, c + rep * 0.1, rep)))
                n += 1
    e = load_experiment(write(tmp_path, BASE))
    exp = {"name": "p", "title": "Papaya", "kind": "server", "description": "", "path": "x.toml",
           "alternatives": [a.label for a in e.alternatives], "sweep": e.sweep, "duration": 1,
           "warmup": 0, "repetitions": 3, "sample_interval": 0.5, "plots": e.plots,
           "baseline": e.baseline, "baselines": e.baselines, "pairs": e.pairs, "note": e.note,
           "table": ["cpu_mean_pct", "reads_per_s"]}
    meta = {"suite": "t", "started": "now", "environment": {}, "models": [], "experiments": [exp]}
    html = report.write_report(out, meta).read_text()
    # One ratio table per baseline.
    assert "Ratios to go (" in html and "Ratios to go-papaya (" in html
    # The pairs: fork / go-papaya = 8.1 / 16.1 and epoll / go = 4.1 / 10.1, per point.
    side = html.split("Pairings side by side", 1)[1].split("</table>", 1)[0]
    assert "the study&#x27;s pairing" in side and "the fair pairing" in side
    row = re.search(r"<tr><td>connections=64</td><td>([0-9.]+)[^<]*</td><td>([0-9.]+)", side)
    assert row, side
    assert abs(float(row.group(1)) - 8.1 / 16.1) < 0.01
    assert abs(float(row.group(2)) - 4.1 / 10.1) < 0.01
    assert "<p>First paragraph.</p><p>Second one.</p>" in html
    assert "server read(2) calls/s" in html


# A parent and a child that each make a known number of read(2) calls, stay alive for a few
# samples, then the child exits and stays a zombie (unreaped: it has left the cgroup with its
# count) while the parent waits, and then the parent exits too: at the sampler's end the
# group is empty and its sum is 0.
READERS = """
import os, time
fd = os.open("/dev/zero", os.O_RDONLY)
pid = os.fork()
n = 2000 if pid == 0 else 3000
for _ in range(n):
    os.read(fd, 1)
if pid == 0:
    time.sleep(1.2)
    os._exit(0)
time.sleep(2.0)
"""


def test_reads_per_s_counts_every_process_and_survives_their_exit():
    g = make_group(f"yard-test-syscr-{os.getpid()}-{time.monotonic_ns()}")
    assert g.kind in ("v1", "v2"), g.describe()
    try:
        s = Sampler(g, 0.25)
        s.start()
        p = subprocess.Popen([sys.executable, "-c", READERS], preexec_fn=g.attach_self)
        assert p.wait(timeout=30) == 0
        totals = s.stop()
    finally:
        g.cleanup()
    # Both processes' reads, plus the interpreter's own start-up reads (a few hundred).
    assert 5000 <= totals["read_syscalls"] <= 5000 + 2000, totals["read_syscalls"]
    assert 0 < totals["read_syscalls_s"] <= totals["wall_s"]
    m = _metrics({"samples": s.samples, "totals": totals})
    assert m["reads_per_s"] == totals["read_syscalls"] / totals["read_syscalls_s"]
