"""yard-load --hist-log and --start-at: an interval log that the hdrhistogram package reads and
that adds up to exactly the run's round trips; generators that start at one agreed instant."""

import json
import math
import subprocess
import time

import pytest

from conftest import BIN

hdrh = pytest.importorskip("hdrh.histogram")
from hdrh.log import HistogramLogReader  # noqa: E402

LOAD = BIN / "yard-load"
WRITER = BIN / "yard-test-histlog"


def load_json(*args, timeout=60):
    r = subprocess.run([LOAD, *map(str, args), "--json"], capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return r.returncode, (json.loads(r.stdout) if r.stdout else None), r.stderr.decode()


def intervals(path):
    reader = HistogramLogReader(str(path), hdrh.HdrHistogram(1, 3_600_000_000_000, 2))
    out = []
    while (h := reader.get_next_interval_histogram()) is not None:
        out.append(h)
    return out, reader


def bucket_at(h, p):
    """A value of the bucket that holds p: the smallest value with at least p% of the samples
    at or below it, as yard-load names a percentile (yard_hist_percentile)."""
    rank = max(1, math.ceil(p / 100 * h.get_total_count()))
    for it in h.get_recorded_iterator():
        if it.total_count_to_this_value >= rank:
            return it.value_iterated_to
    return h.get_max_value()


def added(ivs):
    total = hdrh.HdrHistogram(1, 3_600_000_000_000, 2)
    for h in ivs:
        total.add(h)
    return total


def test_the_encoding_is_hdrhistograms_layout(tmp_path):
    # Values on both sides of every boundary of the layout: the exact range (< 256), the first
    # powers of two, large values, and one above the highest trackable value (an hour),
    # counted in its bucket.
    values = [0, 1, 2, 127, 128, 255, 256, 257, 258, 511, 512, 513, 1000, 4095, 4096, 65537,
              123_456_789, 10**12, 3_599_999_999_999]
    log = tmp_path / "v.hlog"
    args = [f"0:{v}" for v in values] + [f"0:{v}" for v in values[:5]]
    args += ["2:777", "2:7200000000000"]  # two hours: above the highest trackable value
    subprocess.run([WRITER, log, *args], check=True)
    ivs, reader = intervals(log)
    assert reader.get_start_time_sec() == 1000.0
    assert [h.get_total_count() for h in ivs] == [len(values) + 5, 0, 2]
    h = ivs[0]
    for v in values:
        want = values.count(v) + values[:5].count(v)
        # counts at a value are the counts of its bucket: equal values only where buckets are
        # exact; elsewhere the bucket of v holds v (and any neighbour in the same bucket)
        same = [w for w in values + values[:5] if h.values_are_equivalent(w, v)]
        assert h.get_count_at_value(v) == len(same) >= want, v
    assert h.get_min_value() == 0
    assert h.values_are_equivalent(h.get_max_value(), 3_599_999_999_999)
    assert ivs[2].get_count_at_value(777) == 1
    assert ivs[2].values_are_equivalent(ivs[2].get_max_value(), 3_600_000_000_000)
    # exact below 256: every value its own bucket
    for v in range(0, 256, 17):
        assert not h.values_are_equivalent(v, v + 1)


@pytest.mark.parametrize("threads", [1, 3])
def test_echo_log_adds_up_to_the_run(serve, tmp_path, threads):
    server = serve("echo", "epoll")
    log = tmp_path / "echo.hlog"
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 6,
                           "--threads", threads, "--duration", "2.2s", "--hist-log", log)
    assert rc == 0, err
    assert d["hist_log"] == str(log) and not (tmp_path / "echo.hlog.tmp").exists()
    ivs, reader = intervals(log)
    assert len(ivs) == d["hist_log_intervals"] == 3
    assert abs(reader.get_start_time_sec() - d["started_at_epoch_s"]) < 1e-3
    total = added(ivs)
    assert total.get_total_count() == d["messages"] > 0
    # The run's percentiles lie in the same buckets as the added logs' (exactly, not within a
    # tolerance: a bucket is 1/128 to 1/64 of a power of two wide, and two implementations'
    # ways of naming a percentile's value may differ by a bucket or more where samples are
    # sparse, as under TSan).
    for p, key in ((50, "p50"), (99, "p99")):
        run_ns = round(d["latency_us"][key] * 1e3)
        assert total.values_are_equivalent(bucket_at(total, p), run_ns), (p, run_ns)
    max_ns = round(d["latency_us"]["max"] * 1e3)
    assert total.values_are_equivalent(total.get_max_value(), max_ns), max_ns


@pytest.mark.parametrize("mode,app,extra", [
    ("counter", "counter", []),
    ("http", "rest", ["--scenario", "userinfo"]),
])
def test_counter_and_http_write_logs_too(serve, tmp_path, mode, app, extra):
    server = serve(app, "epoll")
    log = tmp_path / f"{mode}.hlog"
    rc, d, err = load_json(mode, "--target", f"127.0.0.1:{server.port}", "--connections", 4,
                           "--duration", "1s", "--hist-log", log, *extra)
    assert rc == 0, err
    ivs, _ = intervals(log)
    assert added(ivs).get_total_count() == d["messages"] > 0


def test_other_modes_refuse_it(tmp_path):
    r = subprocess.run([LOAD, "rate", "--target", "127.0.0.1:9", "--duration", "1s",
                        "--hist-log", tmp_path / "x"], capture_output=True, text=True)
    assert r.returncode == 2 and "--hist-log applies to echo, counter and http" in r.stderr


def test_an_unwritable_log_fails_before_the_run(serve):
    server = serve("echo", "epoll")
    t0 = time.monotonic()
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--duration", "30s",
                           "--hist-log", "/nonexistent/dir/x.hlog")
    assert rc == 1 and d is None and time.monotonic() - t0 < 5
    assert "--hist-log /nonexistent/dir/x.hlog: No such file or directory" in err


def test_start_at_starts_at_that_instant_and_together(serve, tmp_path):
    server = serve("echo", "epoll")
    at = time.time() + 1.5
    argv = [LOAD, "echo", "--target", f"127.0.0.1:{server.port}", "--connections", 2,
            "--duration", "0.5s", "--start-at", f"{at:.6f}", "--json"]
    procs = [subprocess.Popen(list(map(str, argv)), stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=30)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    starts = [o["started_at_epoch_s"] for o in outs]
    for o, s in zip(outs, starts):
        assert o["start_at"] == pytest.approx(at, abs=1e-6)
        assert at <= s < at + 0.05, (at, s)
        # The wait is not in any latency.
        assert o["latency_us"]["max"] < 500_000
    assert abs(starts[0] - starts[1]) < 0.02


@pytest.mark.parametrize("offset,what", [(-10, "s in the past"), (7200, "more than an hour")])
def test_start_at_out_of_range_is_a_usage_error(offset, what):
    r = subprocess.run([LOAD, "echo", "--target", "127.0.0.1:9", "--start-at",
                        f"{time.time() + offset:.3f}"], capture_output=True, text=True)
    assert r.returncode == 2 and what in r.stderr, r.stderr
