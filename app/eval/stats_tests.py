"""Paired significance tests used by :mod:`app.eval.compare`.

Every function takes the per-case values of the *same* cases in the base and the new
report, in the same order (pairing by case id is the caller's job). numpy is imported
inside the functions so that ``rag --help`` never pays for it. The tests are scipy's
(``scipy.stats.wilcoxon`` / ``binomtest`` / ``levene``) computed as scipy computes them, in
plain Python (:mod:`app.eval.stats_dist`; tests/unit/compare/test_stats_dist.py checks them
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
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.eval import stats_dist

ALPHA = 0.05
WILCOXON_ZERO_METHOD = "wilcox"
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95

METHODS = (
    "Continuous metrics: Wilcoxon signed-rank test on the paired per-case values "
    f"(two-sided, zero_method='{WILCOXON_ZERO_METHOD}': tied pairs dropped) and a paired "
    f"bootstrap {int(CI_LEVEL * 100)} % percentile CI of Δ ({BOOTSTRAP_RESAMPLES} resamples, "
    f"seed {BOOTSTRAP_SEED}). Rates: exact McNemar test (two-sided binomial test on the "
    "discordant pairs). Variance: Brown–Forsythe test (Levene, center=median), a flag for "
    f"review. α = {ALPHA} per metric, no multiple-comparison correction."
)


@dataclass(frozen=True)
class McNemar:
    """Discordant pair counts and the exact two-sided p-value."""

    up: int  # base 0 -> new 1
    down: int  # base 1 -> new 0
    p_value: float


def wilcoxon_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of ``new - base``; 1.0 when nothing changed."""
    _check_paired(base, new)
    # every |new - base| ≤ 1e-12 (math.isclose(b, n, rel_tol=0, abs_tol=1e-12) for finite values)
    if max(map(abs, map(operator.sub, new, base))) <= 1e-12:
        return 1.0
    # scipy.stats.wilcoxon(new, base, zero_method="wilcox", alternative="two-sided"), computed
    # as scipy computes it, without importing scipy.stats (app/eval/stats_dist.py)
    return stats_dist.wilcoxon_p(base, new)


def bootstrap_ci(
    base: Sequence[float],
    new: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> tuple[float, float]:
    """Paired bootstrap percentile CI of ``mean(new - base)`` (cases resampled together);
    :func:`bootstrap_cis` of one pair of samples."""
    return bootstrap_cis([(base, new)], resamples=resamples, seed=seed, level=level)[0]


def bootstrap_cis(
    samples: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> list[tuple[float, float]]:
    """The paired bootstrap percentile CI of ``mean(new - base)`` for each ``(base, new)``.

    Differences with at most :data:`app.eval.stats.MULTINOMIAL_MAX_LEVELS` distinct values
    (judge-score and rate differences, an unchanged metric's zeros) are resampled by level
    counts (:func:`app.eval.stats.level_bootstrap_means`: a resample's mean drawn from a
    multinomial — the index bootstrap's distribution, O(resamples × levels)); the others by
    resample indices drawn once per sample size, in chunks of
    :data:`app.eval.stats.BOOTSTRAP_CHUNK_CELLS`, and used for every sample of that size (the
    stream :func:`app.eval.stats.bootstrap_means` draws for each of them: one seed), so memory
    stays bounded at one chunk of indices + one of values (16 MB each)."""
    import numpy as np

    from app.eval.stats import BOOTSTRAP_CHUNK_CELLS, MULTINOMIAL_MAX_LEVELS, level_bootstrap_means

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


def mcnemar_exact(base: Sequence[float], new: Sequence[float]) -> McNemar:
    """Exact McNemar test on paired 0/1 values."""
    _check_paired(base, new)
    for v in {*base, *new}:
        if v not in (0, 1):
            raise ValueError(f"McNemar needs 0/1 values, got {v!r}")
    moves = Counter(zip(base, new, strict=True))
    up = moves[(0, 1)]  # 0.0 == 0 and 1.0 == 1 hash alike: (0.0, 1.0) is counted here
    down = moves[(1, 0)]
    if up + down == 0:
        return McNemar(up=0, down=0, p_value=1.0)
    return McNemar(up=up, down=down, p_value=stats_dist.binom_two_sided_half(up, up + down))


def brown_forsythe_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Brown–Forsythe p-value for equal spread; 1.0 when neither sample spreads at all."""
    if len(base) < 2 or len(new) < 2:
        return 1.0
    med_b = _median(base)
    med_n = _median(new)
    dev_b = [abs(v - med_b) for v in base]
    dev_n = [abs(v - med_n) for v in new]
    # levene divides by the within-group spread of the deviations: all-equal deviations
    # (e.g. both samples constant) make the statistic undefined; there is no evidence.
    if max(max(dev_b), max(dev_n)) - min(min(dev_b), min(dev_n)) < 1e-12:
        return 1.0
    if _spread(dev_b) < 1e-12 and _spread(dev_n) < 1e-12:
        # each group's deviations constant but different: infinitely significant in theory
        return 0.0
    return stats_dist.levene_deviations_p(dev_b, dev_n)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values) if values else 0.0


def _check_paired(base: Sequence[float], new: Sequence[float]) -> None:
    if len(base) != len(new):
        raise ValueError(f"paired samples differ in length: {len(base)} vs {len(new)}")
    if not base:
        raise ValueError("no paired values")
