"""Tool experiments (yard-cswitch): the runner reads a one-point JSON list, derives misses per
1000 instructions from hardware counters, and the report draws the bar chart at `bars_at`, one
panel per value of the second sweep key, and says which requested metrics were not measured."""
import json
import re
import sys

import harness_paths  # noqa: F401
from yard import report
from yard.runner import _parse_json, _tool_metrics


def test_parse_json_accepts_a_one_point_list_only():
    assert _parse_json('[{"kind": "coro", "direct_ns": 9.5}]') == {"kind": "coro", "direct_ns": 9.5}
    assert _parse_json('[{"a": 1}, {"a": 2}]') is None
    assert _parse_json("noise\n{\"a\": 1}") == {"a": 1}
    assert _parse_json("[]") is None


def test_tool_metrics_flatten_and_derive_mpki():
    m = _tool_metrics({"direct_ns": 10.0, "flagged": False, "kind": "coro",
                       "counters": {"instructions": 2_000_000, "l1d_misses": 5000,
                                    "dtlb_misses": 100, "cycles": 3_000_000}})
    assert m["direct_ns"] == 10.0 and "flagged" not in m and "kind" not in m
    assert m["counters.instructions"] == 2e6
    assert m["l1d_misses_per_kinst"] == 2.5
    assert m["dtlb_misses_per_kinst"] == 0.05
    assert "cycles_per_kinst" not in m
    # No counters (a VM): nothing derived, nothing invented.
    assert not any(k.endswith("_per_kinst") for k in _tool_metrics({"direct_ns": 1, "counters": None}))


def _trial(alt, size, stride, value, rep=0):
    return {"experiment": "cs", "alternative": alt, "model": None, "rep": rep, "status": "ok",
            "point": {"array_bytes": size, "stride": stride}, "problems": [],
            "metrics": {"direct_ns": value, "array_bytes": size}}


def test_report_for_a_tool_sweep(tmp_path):
    out = tmp_path / "r"
    raw = out / "raw" / "cs"
    raw.mkdir(parents=True)
    n = 0
    for alt, base in (("process-pipe", 1000.0), ("coro", 10.0)):
        for size in (1024, 65536):
            for stride in (0, 64, 128, 256, 512):
                for rep in range(2):
                    (raw / f"{n}.json").write_text(json.dumps(
                        _trial(alt, size, stride, base * (1 + stride / 256) + rep, rep)))
                    n += 1
    exp = {"name": "cs", "title": "Switches", "kind": "tool", "description": "", "path": "x.toml",
           "alternatives": ["process-pipe", "coro"],
           "sweep": {"array_bytes": [1024, 65536], "stride": [0, 64, 128, 256, 512]},
           "duration": 1, "warmup": 0, "repetitions": 2, "sample_interval": 0.5,
           "plots": ["direct_ns", "l1d_misses_per_kinst"], "baseline": "process-pipe",
           "log_y": True, "bars_at": {"stride": 0, "array_bytes": 1024},
           "table": ["direct_ns", "switches_measured"]}
    meta = {"suite": "t", "started": "now", "environment": {}, "models": [], "experiments": [exp]}
    html = report.write_report(out, meta).read_text()
    # Two figures: the bars at the chosen point and the faceted curves.
    assert len(re.findall(r"data:image/png;base64,", html)) == 2
    assert "Switches: stride=0, array_bytes=1024" not in html  # the title is inside the PNG
    # The requested counter metric was absent and the report says so.
    assert "Not measured on this machine" in html and "L1-dcache misses per 1000" in html
    # Table columns are the requested ones that exist.
    assert "<th>direct cost of one switch (ns)</th>" in html
    assert "switches_measured" not in html
    # Ratios to the baseline: coro is ~100x cheaper at stride 0.
    row = re.search(r"<tr><td>coro</td><td>array_bytes=1024, stride=0</td><td>([0-9.]+)", html)
    assert row and float(row.group(1)) == 10.5  # median of 10 and 11
    ratios = html.split("Ratios to process-pipe", 1)[1]
    row = re.search(r"<tr><td>coro</td><td>array_bytes=1024, stride=0</td><td>([0-9.]+)", ratios)
    assert row and 0.009 < float(row.group(1)) < 0.012
    summary = (out / "summary.csv").read_text()
    assert "cs,coro,\"array_bytes=1024, stride=0\",direct_ns," in summary


