import harness_paths  # noqa: F401  (puts python/ on sys.path)
import numpy as np
import pytest

from yard.stats import cpu_mean_cv, median_ci, ratio_ci


def test_median_ci_covers_true_median_about_95_percent():
    rng = np.random.default_rng(1)
    hits, runs = 0, 400
    for i in range(runs):
        sample = rng.normal(10.0, 2.0, size=25)
        e = median_ci(sample, resamples=1000, seed=i)
        assert e.lo <= e.median <= e.hi
        hits += e.lo <= 10.0 <= e.hi
    # Percentile bootstrap of a median is slightly liberal on small samples; 0.88..0.99 is sane.
    assert 0.88 <= hits / runs <= 0.99, hits / runs


def test_median_ci_narrows_with_more_trials():
    rng = np.random.default_rng(2)
    small = median_ci(rng.normal(0, 1, 10))
    large = median_ci(rng.normal(0, 1, 400))
    assert (large.hi - large.lo) < (small.hi - small.lo)


def test_median_ci_degenerate_inputs():
    assert median_ci([]).n == 0
    e = median_ci([3.0])
    assert (e.median, e.lo, e.hi, e.n) == (3.0, 3.0, 3.0, 1)
    assert median_ci([1.0, float("nan"), 3.0]).n == 2


def test_ratio_ci_of_scaled_samples():
    rng = np.random.default_rng(3)
    a = rng.normal(100, 5, 30)
    b = rng.normal(50, 2.5, 30)
    r = ratio_ci(a, b)
    assert r.lo < 2.0 < r.hi
    assert r.median == pytest.approx(np.median(a) / np.median(b))
    assert ratio_ci(a, [0.0]).n == 0


def test_cv_of_known_series():
    # First sample dropped; the rest alternate 40/60: mean 50, population stdev 10, Cv 0.2.
    mean, cv = cpu_mean_cv([999, 40, 60, 40, 60])
    assert mean == pytest.approx(50.0)
    assert cv == pytest.approx(0.2)
    mean, cv = cpu_mean_cv([0, 25, 25, 25])
    assert (mean, cv) == (25.0, 0.0)
    mean, cv = cpu_mean_cv([5])
    assert np.isnan(mean) and np.isnan(cv)
