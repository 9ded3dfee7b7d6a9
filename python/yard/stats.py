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


# Adaptive repetitions (docs/harness.md, "Adaptive repetitions"): an alternative is repeated at
# a point until the bootstrap CI of its ratio to the experiment's reference there is narrower
# than a set relative half-width, or a maximum count is reached.
DEFAULT_CI_WIDTH = 0.05


@dataclass
class Stop:
    """Whether one (alternative, point) needs more trials, and why it stopped if not."""
    done: bool
    reason: str          # "ci", "max", "fixed" (no room to adapt), "reference", "" running
    n: int               # trials run
    half_width: float    # the ratio CI's relative half-width (nan before two values)
    text: str            # in words, for the report

    def as_dict(self) -> dict:
        return {"done": self.done, "reason": self.reason, "n": self.n,
                "half_width": None if self.half_width != self.half_width else self.half_width,
                "text": self.text}


def relative_half_width(e: Estimate) -> float:
    """(hi - lo) / 2 / median: the CI's half-width as a share of the figure; nan when there is
    no CI (fewer than two values on a side, a zero median)."""
    if e.n < 2 or not np.isfinite(e.median) or e.median == 0 or not np.isfinite(e.lo) \
            or not np.isfinite(e.hi):
        return float("nan")
    return float((e.hi - e.lo) / 2.0 / abs(e.median))


def stop_rule(values: Sequence[float], ref: Sequence[float] | None, trials: int, min_trials: int,
              max_trials: int, width: float = DEFAULT_CI_WIDTH) -> Stop:
    """The stopping rule for one alternative at one point.

    values: the alternative's metric, one per trial that measured it; ref: the reference's at
    the same point (None for the reference itself: then its own median's CI must be narrow); trials: how many trials it ran (failed ones count: a point that
    never measures stops at the maximum). It stops once it has min_trials and the ratio's CI
    half-width is at most `width` of the ratio, or once it has max_trials."""
    e = median_ci(values) if ref is None else ratio_ci(values, ref)
    hw = relative_half_width(e)
    if trials >= min_trials and np.isfinite(hw) and hw <= width and len(_clean(values)) >= 2:
        return Stop(True, "ci", trials, hw, f"{trials} trials: CI ±{hw:.1%} within ±{width:.0%}")
    if trials >= max_trials and max_trials <= min_trials:
        return Stop(True, "fixed", trials, hw, f"{trials} trial(s): a fixed count")
    if trials >= max_trials:
        why = f"CI ±{hw:.1%}" if np.isfinite(hw) else "no CI"
        return Stop(True, "max", trials, hw, f"{trials} trials: the maximum ({why}, wanted "
                    f"±{width:.0%})")
    return Stop(False, "", trials, hw, "")
