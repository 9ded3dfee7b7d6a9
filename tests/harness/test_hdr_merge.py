"""Merging interval logs from several hosts is exact: the sum equals the histogram of every
sample in the window, whatever the hosts' clock offsets, and the warm-up is dropped by time."""

import random

import harness_paths  # noqa: F401
from yard.hdr import latency_us, merge, new_histogram, read_log

T0 = 1_795_480_000.0  # the agreed start, on the harness's clock


def interval_log(samples, host_start):
    """An interval log as yard-load writes it: StartTime and BaseTime, a legend, one line per
    second (relative start, length, max in ms, compressed histogram). samples: (t, value_ns)
    with t seconds since the host's start."""
    lines = [f"#[StartTime: {host_start:.3f} (seconds since epoch), x]",
             f"#[BaseTime: {host_start:.3f} (seconds since epoch)]",
             '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"']
    by_second = {}
    for t, v in samples:
        by_second.setdefault(int(t), []).append(v)
    for sec in sorted(by_second):
        h = new_histogram()
        for v in by_second[sec]:
            h.record_value(v)
        lines.append(f"{sec:.3f},1.000,{h.get_max_value() / 1e6:.3f},{h.encode().decode()}")
    return "\n".join(lines) + "\n"


def test_the_merge_equals_the_histogram_of_all_samples():
    rng = random.Random(7)
    warmup, duration = 1, 4
    hosts = {"load1": 0.0, "load2": 3.7, "load3": -0.25}  # each clock's lead on the harness's
    logs, every = {}, new_histogram()
    for name, offset in hosts.items():
        samples = [(rng.uniform(0, warmup + duration), int(rng.lognormvariate(11, 1.2)))
                   for _ in range(20000)]
        for t, v in samples:
            if t >= warmup:
                every.record_value(v)
        logs[name] = read_log(interval_log(samples, T0 + offset))
        assert len(logs[name]) == warmup + duration
    m = merge(logs, hosts, T0 + warmup)
    assert m.total.get_total_count() == every.get_total_count() > 0
    for p in (0, 50, 90, 99, 99.9, 100):
        assert m.total.get_value_at_percentile(p) == every.get_value_at_percentile(p), p
    # Bucket by bucket, not only at a few percentiles.
    for i in range(every.counts_len):
        assert m.total.get_count_at_index(i) == every.get_count_at_index(i), i
    assert m.total.get_max_value() == every.get_max_value()
    assert all(m.dropped[h] == warmup for h in hosts)
    assert all(abs(m.seconds[h] - duration) < 1e-9 for h in hosts)
    assert sum(h.get_total_count() for h in m.hosts.values()) == every.get_total_count()


def test_an_unmeasured_offset_puts_intervals_outside_the_window():
    # A host whose clock leads by 2 s but is merged as if it did not: its first two intervals
    # look like warm-up and are dropped, so the count is short. Offsets matter.
    samples = [(s + 0.5, 1000) for s in range(5)]
    logs = {"h": read_log(interval_log(samples, T0 + 2.0))}
    assert merge(logs, {"h": 2.0}, T0 + 1).total.get_total_count() == 4
    assert merge(logs, {}, T0 + 1).total.get_total_count() == 5  # 2 s "later": all kept
    assert merge(logs, {}, T0 + 4).total.get_total_count() == 3


def test_latency_fields_are_microseconds():
    h = new_histogram()
    for v in (1000, 2000, 3000, 1_000_000):
        h.record_value(v)
    lat = latency_us(h)
    assert lat["min"] == 1.0 and 990 <= lat["max"] <= 1010 and 1.9 <= lat["p50"] <= 2.1
    assert latency_us(new_histogram()) == {}
