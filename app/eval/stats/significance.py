"""Paired significance tests used by :mod:`app.eval.compare`.

Every function takes the per-case values of the *same* cases in the base and the new
report, in the same order (pairing by case id is the caller's job). numpy is imported
inside the functions so that ``rag --help`` never pays for it. The tests are scipy's
(``scipy.stats.wilcoxon`` / ``binomtest`` / ``levene``) computed as scipy computes them, in
plain Python (:mod:`app.eval.stats.distributions`; tests/unit/compare/test_stats_dist.py checks them
against scipy): importing ``scipy.stats`` would cost a comparison ≈ 1 s and 70 MB.

Methods (printed in the comparison's footnote, see :data:`METHODS`):

* continuous metrics (judge scores, retrieval scores): Wilcoxon signed-rank test on the
  paired differences, two-sided, ``zero_method="wilcox"`` — pairs whose values are equal
  carry no information about the direction of the change and are dropped before ranking
  (scipy's default; with no non-zero difference the p-value is 1). The size of the change
  is a paired bootstrap 95 % percentile CI of the mean difference (``BOOTSTRAP_RESAMPLES``
  resamples of the cases, fixed seed ``BOOTSTRAP_SEED``: the same reports give the same CI).
* binary metrics (per-case 0/1 rates): exact McNemar test — a two-sided binomial test of
  the discordant pairs (0→1 vs 1→0) against p = 0.5 (``scipy.stats.binomtest``).
* variance: Brown–Forsythe test (``scipy.stats.levene(center="median")``). It assumes
  independent samples, which paired runs are not; it is used as a *flag* that asks a human
  to look at the distributions, never as a regression verdict on its own.
* multiple comparisons: Holm's step-down adjustment (:func:`holm`) across the metrics of one
  table (family-wise error), Benjamini–Hochberg (:func:`benjamini_hochberg`) across its
  tag × metric breakdown (false-discovery rate).
* the smallest detectable effect (:func:`detectable_effect`) and the cases a margin needs
  (:func:`cases_needed`): the normal approximation of a paired two-sided test at
  :data:`ALPHA` with :data:`POWER` power, from the spread of the paired differences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.eval.stats import distributions
from app.eval.stats.distributions import Values, floats

ALPHA = 0.05
WILCOXON_ZERO_METHOD = "wilcox"
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95
POWER = 0.8

METHODS = (
    "Continuous metrics: Wilcoxon signed-rank test on the paired per-case values "
    f"(two-sided, zero_method='{WILCOXON_ZERO_METHOD}': tied pairs dropped) and a paired "
    f"bootstrap {int(CI_LEVEL * 100)} % percentile CI of Δ ({BOOTSTRAP_RESAMPLES} resamples, "
    f"seed {BOOTSTRAP_SEED}). Rates: exact McNemar test (two-sided binomial test on the "
    "discordant pairs). Variance: Brown–Forsythe test (Levene, center=median), a flag for "
    f"review. α = {ALPHA}; the metric rows' p-values are Holm-adjusted across the table's "
    "metrics (family-wise error), the tag × metric breakdown's Benjamini–Hochberg-adjusted "
    "across all its pairs (false-discovery rate). Margins of practical relevance: "
    "app/eval/scoring/thresholds.toml [margins]; a detectable effect is the normal "
    f"approximation at α = {ALPHA}, {int(POWER * 100)} % power."
)


@dataclass(frozen=True)
class McNemar:
    """Discordant pair counts and the exact two-sided p-value."""

    up: int  # base 0 -> new 1
    down: int  # base 1 -> new 0
    p_value: float


def wilcoxon_p(base: Values, new: Values) -> float:
    """Two-sided Wilcoxon signed-rank p-value of ``new - base``; 1.0 when nothing changed."""
    import numpy as np

    _check_paired(base, new)
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    # every |new - base| ≤ 1e-12 (math.isclose(b, n, rel_tol=0, abs_tol=1e-12) for finite values)
    if float(np.abs(n - b).max()) <= 1e-12:
        return 1.0
    # scipy.stats.wilcoxon(new, base, zero_method="wilcox", alternative="two-sided"), computed
    # as scipy computes it, without importing scipy.stats (app/eval/stats/distributions.py)
    return distributions.wilcoxon_p(b, n)


def bootstrap_ci(
    base: Values,
    new: Values,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> tuple[float, float]:
    """Paired bootstrap percentile CI of ``mean(new - base)`` (cases resampled together);
    :func:`bootstrap_cis` of one pair of samples."""
    return bootstrap_cis([(base, new)], resamples=resamples, seed=seed, level=level)[0]


def bootstrap_cis(
    samples: Sequence[tuple[Values, Values]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> list[tuple[float, float]]:
    """The paired bootstrap percentile CI of ``mean(new - base)`` for each ``(base, new)``.

    Differences with at most :data:`app.eval.stats.describe.MULTINOMIAL_MAX_LEVELS` distinct values
    (judge-score and rate differences, an unchanged metric's zeros) are resampled by level
    counts (:func:`app.eval.stats.describe.level_bootstrap_means`: a resample's mean drawn from a
    multinomial — the index bootstrap's distribution, O(resamples × levels)); the others by
    resample indices drawn once per sample size, in chunks of
    :data:`app.eval.stats.describe.BOOTSTRAP_CHUNK_CELLS`, and used for every sample of that size (the
    stream :func:`app.eval.stats.describe.bootstrap_means` draws for each of them: one seed), so memory
    stays bounded at one chunk of indices + one of values (16 MB each)."""
    import numpy as np

    from app.eval.stats.describe import (
        BOOTSTRAP_CHUNK_CELLS,
        MULTINOMIAL_MAX_LEVELS,
        level_bootstrap_means,
    )

    tail = (1.0 - level) / 2.0 * 100.0
    out: list[tuple[float, float]] = [(0.0, 0.0)] * len(samples)
    by_size: dict[int, list[tuple[int, Any]]] = {}
    for i, (base, new) in enumerate(samples):
        _check_paired(base, new)
        diffs = np.asarray(new, dtype=float) - np.asarray(base, dtype=float)
        levels, counts = np.unique(diffs, return_counts=True)
        if len(levels) <= MULTINOMIAL_MAX_LEVELS:
            means = level_bootstrap_means(levels, counts, resamples=resamples, seed=seed)
            lo, hi = np.percentile(means, [tail, 100.0 - tail])
            out[i] = (float(lo), float(hi))
        else:
            by_size.setdefault(len(diffs), []).append((i, diffs))
    for n, members in by_size.items():
        rng = np.random.default_rng(seed)
        rows = max(1, BOOTSTRAP_CHUNK_CELLS // n)
        means_of = [np.empty(resamples, dtype=float) for _ in members]
        for start in range(0, resamples, rows):
            stop = min(resamples, start + rows)
            idx = rng.integers(0, n, size=(stop - start, n))
            for (_, diffs), means in zip(members, means_of, strict=True):
                means[start:stop] = diffs[idx].mean(axis=1)
        for (i, _), means in zip(members, means_of, strict=True):
            lo, hi = np.percentile(means, [tail, 100.0 - tail])
            out[i] = (float(lo), float(hi))
    return out


def mcnemar_exact(base: Values, new: Values) -> McNemar:
    """Exact McNemar test on paired 0/1 values."""
    import numpy as np

    _check_paired(base, new)
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    b0, b1, n0, n1 = b == 0, b == 1, n == 0, n == 1
    if not ((b0 | b1).all() and (n0 | n1).all()):
        for v in {*floats(base), *floats(new)}:
            if v not in (0, 1):
                raise ValueError(f"McNemar needs 0/1 values, got {v!r}")
    up = int(np.count_nonzero(b0 & n1))  # base 0 -> new 1 (0.0, -0.0 and 0 alike)
    down = int(np.count_nonzero(b1 & n0))
    if up + down == 0:
        return McNemar(up=0, down=0, p_value=1.0)
    return McNemar(up=up, down=down, p_value=distributions.binom_two_sided_half(up, up + down))


def brown_forsythe_p(base: Values, new: Values) -> float:
    """Brown–Forsythe p-value for equal spread; 1.0 when neither sample spreads at all."""
    import numpy as np

    if len(base) < 2 or len(new) < 2:
        return 1.0
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    dev_b = np.abs(b - _median(b))
    dev_n = np.abs(n - _median(n))
    max_b, min_b, max_n, min_n = (
        float(x) for x in (dev_b.max(), dev_b.min(), dev_n.max(), dev_n.min())
    )
    # levene divides by the within-group spread of the deviations: all-equal deviations
    # (e.g. both samples constant) make the statistic undefined; there is no evidence.
    if max(max_b, max_n) - min(min_b, min_n) < 1e-12:
        return 1.0
    if max_b - min_b < 1e-12 and max_n - min_n < 1e-12:
        # each group's deviations constant but different: infinitely significant in theory
        return 0.0
    return distributions.levene_deviations_p(dev_b, dev_n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: sorted ascending, the i-th
    (0-based) of m is ``min(1, max over j ≤ i of (m − j) · p_(j))``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q-values), in the input order: sorted
    ascending, the k-th (1-based) of m is ``min over j ≥ k of (m / j) · p_(j)``, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m / (rank + 1) * p_values[i])
        out[i] = min(1.0, running)
    return out


def _z(q: float) -> float:
    """The standard normal quantile (``NormalDist().inv_cdf``)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def detectable_effect(
    sd_diff: float, n: int, *, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The smallest mean paired difference a two-sided test at ``alpha`` detects with
    ``power`` over ``n`` cases whose differences spread by ``sd_diff``:
    ``(z₁₋α/₂ + z_power) · sd / √n`` (the normal approximation)."""
    if n <= 0:
        return math.inf
    return (_z(1 - alpha / 2) + _z(power)) * sd_diff / math.sqrt(n)


def cases_needed(
    sd_diff: float, margin: float, *, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """The cases at which :func:`detectable_effect` shrinks to ``margin``: the suite size
    that would tell a change of the margin from none (``None`` for a margin of 0)."""
    if margin <= 0:
        return None
    return max(2, math.ceil(((_z(1 - alpha / 2) + _z(power)) * sd_diff / margin) ** 2))


def mean(values: Values) -> float:
    """``sum(values) / len(values)``: Python's left-to-right float sum, also of an array."""
    return sum(floats(values)) / len(values)


def sample_std(values: Values) -> float:
    """``sqrt(Σ (v − mean)² / (n − 1))`` as the plain loop computes it (0.0 below 2 values)."""
    if len(values) < 2:
        return 0.0
    return math.sqrt(distributions.sum_sq_dev(values, mean(values)) / (len(values) - 1))


def _median(values: Any) -> float:
    """The median of an array, as ``sorted`` + the middle one or the mean of the two."""
    import numpy as np

    s = np.sort(values)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (float(s[mid - 1]) + float(s[mid])) / 2.0


def _check_paired(base: Values, new: Values) -> None:
    if len(base) != len(new):
        raise ValueError(f"paired samples differ in length: {len(base)} vs {len(new)}")
    if not len(base):
        raise ValueError("no paired values")
