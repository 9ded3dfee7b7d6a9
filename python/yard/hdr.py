"""Latency histograms from several load hosts, merged exactly.

Each host's yard-load writes an HdrHistogram interval log (`--hist-log`): one histogram per
second of its run, stamped with the host's clock. Merging adds the interval histograms' counts
(never averages percentiles), after moving each host's stamps onto the harness's clock by the
offset measured for that host, and keeps only the intervals inside the measured window (the
warm-up is dropped by time). Percentiles are then read from the sum, exactly as if one
histogram had recorded every sample.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

# yard-load's histogram: HdrHistogram's layout for lowest discernible value 1 ns and 2
# significant digits; one hour is far above any latency a trial can see.
LOWEST_NS, HIGHEST_NS, DIGITS = 1, 3_600_000_000_000, 2


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)


@dataclass
class Interval:
    start_s: float           # absolute, on the host's clock
    length_s: float
    hist: HdrHistogram


def read_log(text: str) -> list[Interval]:
    """The intervals of an interval log (its text), with absolute start times."""
    fd, path = tempfile.mkstemp(suffix=".hlog")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        reader = HistogramLogReader(path, new_histogram())
        out = []
        while True:
            h = reader.get_next_interval_histogram(absolute=True)
            if h is None:
                return out
            start = h.get_start_time_stamp() / 1000.0
            out.append(Interval(start, h.get_end_time_stamp() / 1000.0 - start, h))
    finally:
        os.unlink(path)


@dataclass
class Merged:
    total: HdrHistogram = field(default_factory=new_histogram)
    hosts: dict[str, HdrHistogram] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)   # kept interval time per host
    dropped: dict[str, int] = field(default_factory=dict)     # intervals outside the window


def merge(logs: dict[str, list[Interval]], offsets: dict[str, float], window_from: float,
          window_to: float | None = None) -> Merged:
    """Add every host's intervals that start inside [window_from, window_to) on the harness's
    clock; a host's clock reads offsets[host] seconds ahead of the harness's. Interval starts
    are compared with a millisecond's tolerance (they are aligned on the agreed start time)."""
    m = Merged()
    for host, intervals in logs.items():
        mine = new_histogram()
        kept = 0.0
        m.dropped[host] = 0
        for iv in intervals:
            start = iv.start_s - offsets.get(host, 0.0)
            if start < window_from - 1e-3 or (window_to is not None and start >= window_to - 1e-3):
                m.dropped[host] += 1
                continue
            mine.add(iv.hist)
            kept += iv.length_s
        m.hosts[host] = mine
        m.seconds[host] = kept
        m.total.add(mine)
    return m


def latency_us(h: HdrHistogram) -> dict[str, float]:
    """yard-load's latency_us fields, read from a histogram of nanoseconds."""
    if h.get_total_count() == 0:
        return {}
    return {"min": h.get_min_value() / 1e3, "p50": h.get_value_at_percentile(50) / 1e3,
            "p90": h.get_value_at_percentile(90) / 1e3, "p99": h.get_value_at_percentile(99) / 1e3,
            "p999": h.get_value_at_percentile(99.9) / 1e3, "max": h.get_max_value() / 1e3,
            "mean": h.get_mean_value() / 1e3}
