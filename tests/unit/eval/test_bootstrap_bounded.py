"""The memory-bounded bootstrap: chunked draws, same CI; agrees with scipy.stats.bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from app.eval.stats import describe, significance


def _one_matrix_ci(diffs: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """The textbook form: one (resamples, n) index matrix, percentile 2.5/97.5."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diffs), size=(resamples, len(diffs)))
    lo, hi = np.percentile(diffs[idx].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def _paired(n: int, seed: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = rng.integers(1, 6, size=n).astype(float)
    new = np.clip(base + rng.normal(0.15, 0.8, size=n).round(), 1, 5)
    return base.tolist(), new.tolist()


def _continuous(n: int, seed: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = rng.normal(0.6, 0.2, size=n)
    return base.tolist(), (base + rng.normal(0.03, 0.1, size=n)).tolist()


def test_chunked_draws_equal_one_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = _continuous(501, seed=3)  # > 64 distinct differences: index resampling
    diffs = np.asarray(new) - np.asarray(base)
    assert len(np.unique(diffs)) > describe.MULTINOMIAL_MAX_LEVELS
    # 3 resample rows per chunk: 667 chunks, the last one short
    monkeypatch.setattr(describe, "BOOTSTRAP_CHUNK_CELLS", 3 * 501 + 7)
    got = significance.bootstrap_ci(base, new, resamples=2000, seed=11)
    assert got == _one_matrix_ci(diffs, 2000, 11)


def test_cis_drawn_together_are_each_samples_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """compare draws the CIs of all metrics at once (indices shared per sample size): each
    CI is the one its own call gives, for index- and level-resampled samples alike."""
    monkeypatch.setattr(describe, "BOOTSTRAP_CHUNK_CELLS", 7 * 400)
    samples = [_continuous(400, 1), _paired(400, 2), _continuous(400, 3), _continuous(250, 4)]
    samples.append(([1.0] * 400, [1.0] * 400))  # an unchanged metric: (0, 0)
    together = significance.bootstrap_cis(samples)
    assert together == [significance.bootstrap_ci(b, n) for b, n in samples]
    assert together[-1] == (0.0, 0.0)
    for (b, n), ci in zip(samples[:4], together[:4], strict=True):
        diffs = np.asarray(n) - np.asarray(b)
        if len(np.unique(diffs)) > describe.MULTINOMIAL_MAX_LEVELS:
            assert ci == _one_matrix_ci(diffs, 2000, 0)


def test_paired_level_ci_agrees_with_scipy() -> None:
    """Judge-score differences (few levels) are resampled by level counts: the CI agrees
    with scipy.stats.bootstrap (percentile) within 4 Monte-Carlo standard errors."""
    base, new = _paired(3000, seed=5)
    diffs = np.asarray(new) - np.asarray(base)
    assert len(np.unique(diffs)) <= describe.MULTINOMIAL_MAX_LEVELS
    lo, hi = significance.bootstrap_ci(base, new)
    ref = sps.bootstrap(
        (diffs,),
        np.mean,
        n_resamples=20_000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(77),
    ).confidence_interval
    sd_boot = float(diffs.std(ddof=1)) / math.sqrt(len(diffs))
    se = math.sqrt(0.025 * 0.975 / 2000) / 0.05844 * sd_boot
    assert abs(lo - ref.low) < 4 * se and abs(hi - ref.high) < 4 * se, (lo, hi, ref)
    assert lo < float(diffs.mean()) < hi


def test_memory_is_bounded() -> None:
    # 2000 resamples of 10,000 values: one matrix would be 160 MB of indices
    rows = describe.BOOTSTRAP_CHUNK_CELLS // 10_000
    assert rows * 10_000 * 8 <= 16 * 2**20 < 2000 * 10_000 * 8


def test_ci_agrees_with_scipy_within_monte_carlo_error() -> None:
    base, new = _continuous(400, seed=7)
    diffs = np.asarray(new) - np.asarray(base)
    lo, hi = significance.bootstrap_ci(base, new, resamples=2000, seed=0)
    ref = sps.bootstrap(
        (diffs,),
        np.mean,
        n_resamples=2000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(12345),
    ).confidence_interval
    # Monte-Carlo SE of a 2.5 % quantile of B = 2000 normal-ish bootstrap means is
    # sqrt(p(1-p)/B) / pdf(z) * sd_boot ≈ 0.06 sd_boot; two independent estimates differ by
    # ≈ 0.085 sd_boot in SE. Allow 4 SE.
    sd_boot = float(diffs.std(ddof=1)) / math.sqrt(len(diffs))
    se = math.sqrt(2) * math.sqrt(0.025 * 0.975 / 2000) / 0.05844 * sd_boot
    assert abs(lo - ref.low) < 4 * se
    assert abs(hi - ref.high) < 4 * se
    # and the interval is a real one around the observed mean difference
    assert lo < float(diffs.mean()) < hi


def test_report_ci_chunked_equals_one_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(1).random(333).tolist()
    before = describe.bootstrap_ci(values, seed=9)
    monkeypatch.setattr(describe, "BOOTSTRAP_CHUNK_CELLS", 333 * 5)
    assert describe.bootstrap_ci(values, seed=9) == before
    rng = np.random.default_rng(9)
    idx = rng.integers(0, 333, size=(2000, 333))
    ref = np.quantile(np.asarray(values)[idx].mean(axis=1), [0.025, 0.975])
    assert before == [float(ref[0]), float(ref[1])]


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        ("rate", np.random.default_rng(5).binomial(1, 0.83, size=4000).astype(float)),
        ("score 1-5", np.random.default_rng(6).integers(1, 6, size=4000).astype(float)),
    ],
)
def test_level_bootstrap_ci_agrees_with_scipy(kind: str, values: np.ndarray) -> None:
    """Few distinct levels: means drawn from multinomial level counts (issue 14: 10,000
    cases × 14 metrics took ≈ 5 s by index resampling). Reference: scipy.stats.bootstrap,
    percentile method, within 4 Monte-Carlo standard errors (as for the paired CI)."""
    assert len(np.unique(values)) <= describe.MULTINOMIAL_MAX_LEVELS
    lo, hi = describe.bootstrap_ci(values.tolist(), seed=3)
    ref = sps.bootstrap(
        (values,),
        np.mean,
        n_resamples=20_000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(4),
    ).confidence_interval
    sd_boot = float(values.std(ddof=1)) / math.sqrt(len(values))
    se = math.sqrt(0.025 * 0.975 / 2000) / 0.05844 * sd_boot  # scipy's own SE is smaller
    assert abs(lo - ref.low) < 4 * se and abs(hi - ref.high) < 4 * se, (kind, lo, hi, ref)
    assert lo < float(values.mean()) < hi
    assert describe.bootstrap_ci(values.tolist(), seed=3) == [lo, hi]  # seeded


def test_level_bootstrap_means_have_the_index_bootstraps_distribution() -> None:
    """Multinomial level counts vs index resampling of the same values: the bootstrap
    means' mean and spread agree (20,000 resamples each; SE of the sd ≈ sd / sqrt(2B))."""
    values = np.random.default_rng(8).integers(1, 6, size=700).astype(float)
    levels, counts = np.unique(values, return_counts=True)
    by_level = describe.level_bootstrap_means(levels, counts, resamples=20_000, seed=1)
    by_index = describe.bootstrap_means(values, resamples=20_000, seed=2)
    sd = float(values.std(ddof=0)) / math.sqrt(len(values))  # the bootstrap's exact sd
    for means in (by_level, by_index):
        assert abs(float(means.mean()) - float(values.mean())) < 4 * sd / math.sqrt(20_000)
        assert abs(float(means.std()) - sd) < 4 * sd / math.sqrt(2 * 20_000)
