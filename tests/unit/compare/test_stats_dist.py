"""The scipy-free paired tests (app/eval/stats/distributions.py) give scipy's p-values: the reference
is scipy.stats itself, on random, tied, zero-heavy and lopsided samples."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from app.eval.stats import distributions, significance

REPO = Path(__file__).resolve().parents[3]


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
        new[rng.choice(n, size=min(n, max(3, n // 50)), replace=False)] += 1.0
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
    got = significance.wilcoxon_p(base, new)
    assert n > distributions.WILCOXON_EXACT_MAX
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300), (kind, got, ref)


@pytest.mark.parametrize(("seed", "n", "kind"), CASES)
def test_brown_forsythe_is_scipys(seed: int, n: int, kind: str) -> None:
    base, new = _samples(seed, n, kind)
    ref = float(sps.levene(base, new, center="median").pvalue)
    got = significance.brown_forsythe_p(base, new)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300), (kind, got, ref)


def test_brown_forsythe_unequal_sizes_and_tiny_p() -> None:
    rng = np.random.default_rng(9)
    base = rng.normal(0, 1, size=300).tolist()
    new = rng.normal(0, 4, size=701).tolist()
    ref = float(sps.levene(base, new, center="median").pvalue)
    assert ref < 1e-30  # deep in the tail: relative accuracy still holds
    assert distributions.levene_median_p(base, new) == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 9), (4, 8), (3, 8), (7, 8), (0, 30), (120, 300), (900, 2000)]
)
def test_binomial_two_sided_is_scipys(k: int, n: int) -> None:
    ref = float(sps.binomtest(k, n, 0.5, alternative="two-sided").pvalue)
    assert distributions.binom_two_sided_half(k, n) == pytest.approx(ref, rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("a", [0.5, 1.0, 3.5, 40.0, 2_500.0, 9_999.0])
@pytest.mark.parametrize("x", [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 0.999_99])
def test_betainc_is_scipys(a: float, x: float) -> None:
    ref = float(special.betainc(a, 0.5, x))
    got = distributions.betainc(a, 0.5, x)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300)


def test_normal_tail_is_scipys() -> None:
    for z in [0.0, 0.3, -0.99, 1.0, 2.5, -7.0, 20.0, 37.0]:
        ref = 2 * float(special.ndtr(-abs(z)))
        assert distributions.normal_two_sided_p(z) == pytest.approx(ref, rel=1e-13, abs=1e-300)


SMALL = [
    (seed, n, kind)
    for seed, n in [(11, 1), (12, 2), (13, 5), (14, 9), (15, 13), (16, 14), (17, 30), (18, 50)]
    for kind in ("scores", "continuous", "shifted", "rare")
]


@pytest.mark.parametrize(("seed", "n", "kind"), SMALL)
def test_small_samples_exact_and_permutation_are_scipys(seed: int, n: int, kind: str) -> None:
    """≤ 50 pairs: scipy's exact distribution (no ties, no zeros), its permutation test over
    all 2ⁿ sign flips (ties or zeros, ≤ 13 pairs) or the normal approximation (else)."""
    base, new = _samples(seed, n, kind)
    if all(b == x for b, x in zip(base, new, strict=True)):
        new[0] += 1.0  # at least one difference
    ref = float(sps.wilcoxon(new, base, zero_method="wilcox", alternative="two-sided").pvalue)
    assert distributions.wilcoxon_p(base, new) == pytest.approx(ref, rel=1e-12), (kind, n)
    assert significance.wilcoxon_p(base, new) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("n", [3, 8, 13, 20, 50])
def test_tied_and_untied_handpicked(n: int) -> None:
    base = [float(i % 5) for i in range(n)]
    untied = [b + (i + 1) * (1 if i % 3 else -1) for i, b in enumerate(base)]  # distinct |d|
    tied = [b + (1.0 if i % 3 else -2.0) if i % 4 else b for i, b in enumerate(base)]
    for new in (untied, tied):
        ref = float(sps.wilcoxon(new, base, zero_method="wilcox").pvalue)
        assert distributions.wilcoxon_p(base, new) == pytest.approx(ref, rel=1e-12)


def test_compare_imports_no_scipy_stats(tmp_path: Path) -> None:
    """The tests above are the check against scipy; `rag eval compare` itself does not
    import scipy.stats (≈ 1 s and 70 MB per process)."""
    script = (
        "import sys\n"
        "from app.eval.stats import significance\n"
        "b = [float(i % 5) for i in range(40)]\n"
        "n = [x + (i % 3) - 1 for i, x in enumerate(b)]\n"
        "significance.wilcoxon_p(b, n); significance.wilcoxon_p(b[:9], n[:9])\n"
        "significance.brown_forsythe_p(b, n); significance.mcnemar_exact([0, 1, 1], [1, 1, 0])\n"
        "significance.bootstrap_ci(b, n)\n"
        "print(any(m.startswith('scipy') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "False"


def test_no_nonzero_difference() -> None:
    assert math.isnan(distributions.wilcoxon_asymptotic_p([1.0] * 60, [1.0] * 60))
    assert significance.wilcoxon_p([1.0] * 60, [1.0] * 60) == 1.0
