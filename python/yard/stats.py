"""Statistics over trials: medians with bootstrap confidence intervals, ratios, CPU mean and Cv.

Every interval here is computed over *trials* (one number per trial), never over requests:
requests inside one trial are not independent, trials are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

DEFAULT_RESAMPLES = 4000


@dataclass
class Estimate:
    median: float
    lo: float
    hi: float
    n: int

    def fmt(self, digits: int = 3) -> str:
        if self.n == 0 or not np.isfinite(self.median):
            return "n/a"
        if self.n == 1:
            return f"{_g(self.median, digits)} (n=1)"
        return f"{_g(self.median, digits)} [{_g(self.lo, digits)}, {_g(self.hi, digits)}]"


def _g(x: float, digits: int) -> str:
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:,.0f}"


def _clean(values: Sequence[float]) -> np.ndarray:
    a = np.asarray([v for v in values if v is not None], dtype=float)
    return a[np.isfinite(a)]


def median_ci(values: Sequence[float], level: float = 0.95, resamples: int = DEFAULT_RESAMPLES,
              seed: int | None = 12345) -> Estimate:
    """Median with a percentile-bootstrap CI (resampling trials with replacement)."""
    a = _clean(values)
    if a.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    med = float(np.median(a))
    if a.size == 1:
        return Estimate(med, med, med, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(resamples, a.size))
    meds = np.median(a[idx], axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(meds, [alpha, 1.0 - alpha])
    return Estimate(med, float(lo), float(hi), int(a.size))


def ratio_ci(num: Sequence[float], den: Sequence[float], level: float = 0.95,
             resamples: int = DEFAULT_RESAMPLES, seed: int | None = 54321) -> Estimate:
    """Ratio of medians num/den; each group is resampled independently for the CI."""
    a, b = _clean(num), _clean(den)
    if a.size == 0 or b.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    mb = float(np.median(b))
    if mb == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    r = float(np.median(a)) / mb
    n = int(min(a.size, b.size))
    if a.size == 1 and b.size == 1:
        return Estimate(r, r, r, 1)
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    mbs = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rs = ma / mbs
    rs = rs[np.isfinite(rs)]
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(rs, [alpha, 1.0 - alpha]) if rs.size else (float("nan"), float("nan"))
    return Estimate(r, float(lo), float(hi), n)


def cpu_mean_cv(series: Sequence[float], drop_first: int = 1) -> tuple[float, float]:
    """Mean CPU% and coefficient of variation (population stdev / mean) of a sample series.

    As in the papayaChat study the first sample is dropped: it straddles the start-up.
    """
    a = _clean(list(series)[drop_first:])
    if a.size == 0:
        return float("nan"), float("nan")
    mean = float(a.mean())
    if mean == 0:
        return 0.0, float("nan")
    return mean, float(a.std() / mean)
