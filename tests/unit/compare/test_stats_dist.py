"""The scipy-free paired tests (app/eval/stats_dist.py) give scipy's p-values: the reference
is scipy.stats itself, on random, tied, zero-heavy and lopsided samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from app.eval import stats_dist, stats_tests


def _samples(seed: int, n: int, kind: str) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    if kind == "scores":  # 1-5 judge scores: many ties and zero differences
        base = rng.integers(1, 6, size=n).astype(float)
        new = np.clip(base + rng.choice([-1, 0, 0, 0, 1, 2], size=n), 1, 5)
    elif kind == "continuous":
        base = rng.normal(0.5, 0.2, size=n)
        new = base + rng.normal(0.02, 0.1, size=n)
    elif kind == "shifted":  # a large, very significant change
        base = rng.normal(3.0, 1.0, size=n)
        new = base - 0.8 + rng.normal(0, 0.3, size=n)
    else:  # "rare": almost all pairs unchanged
        base = rng.integers(0, 3, size=n).astype(float)
        new = base.copy()
        new[rng.choice(n, size=max(3, n // 50), replace=False)] += 1.0
    return base.tolist(), new.tolist()


CASES = [
    (seed, n, kind)
    for seed, n in [(1, 51), (2, 120), (3, 999), (4, 10_000)]
    for kind in ("scores", "continuous", "shifted", "rare")
]


@pytest.mark.parametrize(("seed", "n", "kind"), CASES)
def test_wilcoxon_is_scipys(seed: int, n: int, kind: str) -> None:
    base, new = _samples(seed, n, kind)
    ref = float(sps.wilcoxon(new, base, zero_method="wilcox", alternative="two-sided").pvalue)
    got = stats_tests.wilcoxon_p(base, new)
    assert n > stats_dist.WILCOXON_EXACT_MAX
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300), (kind, got, ref)


@pytest.mark.parametrize(("seed", "n", "kind"), CASES)
def test_brown_forsythe_is_scipys(seed: int, n: int, kind: str) -> None:
    base, new = _samples(seed, n, kind)
    ref = float(sps.levene(base, new, center="median").pvalue)
    got = stats_tests.brown_forsythe_p(base, new)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300), (kind, got, ref)


def test_brown_forsythe_unequal_sizes_and_tiny_p() -> None:
    rng = np.random.default_rng(9)
    base = rng.normal(0, 1, size=300).tolist()
    new = rng.normal(0, 4, size=701).tolist()
    ref = float(sps.levene(base, new, center="median").pvalue)
    assert ref < 1e-30  # deep in the tail: relative accuracy still holds
    assert stats_dist.levene_median_p(base, new) == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 9), (4, 8), (3, 8), (7, 8), (0, 30), (120, 300), (900, 2000)]
)
def test_binomial_two_sided_is_scipys(k: int, n: int) -> None:
    ref = float(sps.binomtest(k, n, 0.5, alternative="two-sided").pvalue)
    assert stats_dist.binom_two_sided_half(k, n) == pytest.approx(ref, rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("a", [0.5, 1.0, 3.5, 40.0, 2_500.0, 9_999.0])
@pytest.mark.parametrize("x", [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 0.999_99])
def test_betainc_is_scipys(a: float, x: float) -> None:
    ref = float(special.betainc(a, 0.5, x))
    got = stats_dist.betainc(a, 0.5, x)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300)


def test_normal_tail_is_scipys() -> None:
    for z in [0.0, 0.3, -0.99, 1.0, 2.5, -7.0, 20.0, 37.0]:
        ref = 2 * float(special.ndtr(-abs(z)))
        assert stats_dist.normal_two_sided_p(z) == pytest.approx(ref, rel=1e-13, abs=1e-300)


def test_small_samples_still_go_to_scipy() -> None:
    base = [1.0, 2.0, 3.0, 4.0, 5.0, 2.0, 3.0, 1.0]
    new = [2.0, 3.0, 5.0, 4.5, 5.0, 1.0, 4.0, 3.0]
    ref = float(sps.wilcoxon(new, base, zero_method="wilcox").pvalue)
    assert stats_tests.wilcoxon_p(base, new) == ref


def test_no_nonzero_difference() -> None:
    assert math.isnan(stats_dist.wilcoxon_asymptotic_p([1.0] * 60, [1.0] * 60))
    assert stats_tests.wilcoxon_p([1.0] * 60, [1.0] * 60) == 1.0
