"""The paired tests of :mod:`app.eval.stats.significance` in plain Python, without ``scipy.stats``.

Importing ``scipy.stats`` costs ≈ 1 s of CPU and ≈ 70 MB of memory: more than the rest of a
``rag eval compare`` of two 10,000-case reports. The formulas here are scipy's (1.17), so
the p-values are scipy's to rounding (tests/unit/compare/test_stats_dist.py checks them
against scipy on random and tied samples):

* :func:`wilcoxon_p` — ``scipy.stats.wilcoxon(new, base, zero_method="wilcox")`` with
  scipy's ``method="auto"``: for more than 50 pairs (or more than 13 with ties or zero
  differences) the normal approximation with the tie correction of the variance, no
  continuity correction (zero differences dropped, average ranks of ``|d|``,
  ``z = (R+ − n(n+1)/4) / σ``, ``p = 2·Φ(−|z|)``); without ties or zeros up to 50 pairs the
  exact distribution of R+; with them up to 13 pairs the exact distribution over all 2ⁿ sign
  flips (scipy's permutation test enumerates them) — both counted exactly in integers.
* :func:`levene_median_p` — ``scipy.stats.levene(base, new, center="median")``
  (Brown–Forsythe): the F statistic of the absolute deviations from each sample's median,
  ``p = F.sf(W; 1, N − 2)`` through the regularized incomplete beta function
  (:func:`betainc`, a Lentz continued fraction).
* :func:`binom_two_sided_half` — ``scipy.stats.binomtest(k, n, 0.5).pvalue``: for p = ½ the
  distribution is symmetric, so the two-sided p-value is ``min(1, 2·P(X ≤ min(k, n − k)))``,
  computed exactly in integers (``k = n/2``: 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from numpy.typing import NDArray

# per-case values: a list (the tests, scipy's cross-checks) or a float array (the comparison's
# columns); every function gives the same floats for both
Values = Union[Sequence[float], "NDArray[Any]"]

__all__ = [
    "WILCOXON_EXACT_MAX",
    "betainc",
    "binom_two_sided_half",
    "levene_deviations_p",
    "levene_median_p",
    "normal_two_sided_p",
    "sum_sq_dev",
    "wilcoxon_asymptotic_p",
    "wilcoxon_p",
]

WILCOXON_EXACT_MAX = 50  # scipy's method="auto": exact/permutation up to this many pairs
WILCOXON_PERMUTATION_MAX = 13  # … with ties or zero differences: all 2ⁿ sign flips up to this
_SQRT1_2 = math.sqrt(0.5)


def normal_two_sided_p(z: float) -> float:
    """``2 · Φ(−|z|)`` as scipy's ``ndtr`` evaluates it (erf near 0, erfc in the tails)."""
    x = abs(z) * _SQRT1_2
    if x < _SQRT1_2:
        return 1.0 - math.erf(x)  # 2 * (0.5 + 0.5 * erf(-x))
    return math.erfc(x)  # 2 * (0.5 * erfc(x))


def _signed_ranks(
    base: Sequence[float], new: Sequence[float]
) -> tuple[list[tuple[float, bool]], int, bool, float]:
    """``([(average rank of |d|, d > 0)] of the non-zero differences, zeros, ties?,
    Σ(t³ − t) over the tie groups)`` of ``d = new − base``."""
    diffs = [n - b for b, n in zip(base, new, strict=True)]
    nonzero = sorted((abs(d), d > 0) for d in diffs if d != 0)
    count = len(nonzero)
    ranked: list[tuple[float, bool]] = []
    tie_correct = 0.0
    ties = False
    i = 0
    while i < count:
        j = i
        value = nonzero[i][0]
        while j + 1 < count and nonzero[j + 1][0] == value:
            j += 1
        t = j - i + 1
        ties = ties or t > 1
        rank = (i + 1 + j + 1) / 2.0  # the average of ranks i+1 … j+1
        ranked.extend((rank, nonzero[k][1]) for k in range(i, j + 1))
        tie_correct += float(t**3 - t)
        i = j + 1
    return ranked, len(diffs) - count, ties, tie_correct


def wilcoxon_p(base: Values, new: Values) -> float:
    """``scipy.stats.wilcoxon(new, base, zero_method="wilcox").pvalue`` (two-sided, scipy's
    ``method="auto"``): more than 50 pairs, or more than 13 with ties or zero differences →
    the normal approximation; no ties and no zeros → the exact distribution of R+; else
    (≤ 13 pairs) the exact sign-flip permutation distribution scipy enumerates. NaN when no
    difference is non-zero."""
    n = len(base)
    if n > WILCOXON_EXACT_MAX:  # the normal approximation only: no ranked list needed
        count, r_plus, tie_correct = _rank_sums(base, new)
        return _normal_p(count, r_plus, tie_correct) if count else math.nan
    ranked, zeros, ties, tie_correct = _signed_ranks(floats(base), floats(new))
    if not ranked:
        return math.nan
    if n > WILCOXON_EXACT_MAX or ((ties or zeros) and n > WILCOXON_PERMUTATION_MAX):
        return _asymptotic(ranked, tie_correct)
    r_plus = sum(r for r, positive in ranked if positive)
    if not ties and not zeros:
        return _exact(n, r_plus)
    return _permutation(ranked, r_plus)


def wilcoxon_asymptotic_p(base: Sequence[float], new: Sequence[float]) -> float:
    """The two-sided Wilcoxon signed-rank p-value of ``new − base`` by the normal
    approximation with the tie correction (what scipy uses for more than 50 pairs)."""
    ranked, _, _, tie_correct = _signed_ranks(base, new)
    return _asymptotic(ranked, tie_correct) if ranked else math.nan


def _rank_sums(base: Values, new: Values) -> tuple[int, float, float]:
    """``(number of non-zero differences, R+, Σ(t³ − t) over the tie groups)`` of
    ``d = new − base``: what :func:`_asymptotic` takes from :func:`_signed_ranks`, counted
    with numpy (the same ``d``, the same average ranks of ``|d|``). R+ adds the ranks of the
    positive differences group by group in ascending ``|d|``, and Σ(t³ − t) the groups'
    terms in that order, as the loops do: the same floats in the same order."""
    import numpy as np

    d = np.asarray(new, dtype=float) - np.asarray(base, dtype=float)
    d = d[d != 0]
    count = len(d)
    if count == 0:
        return 0, 0.0, 0.0
    a = np.abs(d)
    order = np.argsort(a, kind="stable")
    s = a[order]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    sizes = np.diff(np.append(starts, count))
    ranks = np.repeat((2 * starts + sizes + 1) / 2.0, sizes)  # (i + 1 + j + 1) / 2
    r_plus = sum(ranks[d[order] > 0].tolist())
    tie_correct = sum(float(t**3 - t) for t in sizes.tolist())
    return count, r_plus, tie_correct


def _asymptotic(ranked: list[tuple[float, bool]], tie_correct: float) -> float:
    r_plus = 0.0
    for rank, positive in ranked:
        if positive:
            r_plus += rank
    return _normal_p(len(ranked), r_plus, tie_correct)


def _normal_p(count: int, r_plus: float, tie_correct: float) -> float:
    """The normal approximation's two-sided p-value of R+ over ``count`` non-zero
    differences, the variance tie-corrected."""
    c = float(count)
    mn = c * (c + 1.0) * 0.25
    se = c * (c + 1.0) * (2.0 * c + 1.0)
    se = math.sqrt((se - tie_correct / 2) / 24)
    if se == 0.0:
        return math.nan
    return normal_two_sided_p((r_plus - mn) / se)


def _subset_sum_counts(weights: Sequence[int]) -> list[int]:
    """``counts[s]`` = the number of subsets of ``weights`` summing to ``s``."""
    counts = [1]
    for w in weights:
        grown = counts + [0] * w
        for s, c in enumerate(counts):
            grown[s + w] += c
        counts = grown
    return counts


def _exact(n: int, r_plus: float) -> float:
    """Ranks 1…n, each sign equally likely: ``2 · min(P(R+ ≥ ⌊T⌋), P(R+ ≤ ⌈T⌉))``."""
    counts = _subset_sum_counts(range(1, n + 1))
    total = 1 << n
    sf = sum(counts[math.floor(r_plus) :]) / total
    cdf = sum(counts[: math.ceil(r_plus) + 1]) / total
    return min(1.0, 2 * min(sf, cdf))


def _permutation(ranked: list[tuple[float, bool]], r_plus: float) -> float:
    """Every sign flip of the non-zero differences (zero ones change nothing): the share
    of flips whose R+ is ≤ / ≥ the observed one, two-sided (scipy's permutation_test with
    all 2ⁿ flips; ranks are multiples of ½, so the sums are counted in halves, exactly)."""
    halves = [round(2 * r) for r, _ in ranked]
    counts = _subset_sum_counts(halves)
    observed = round(2 * r_plus)
    total = 1 << len(halves)
    less = sum(counts[: observed + 1]) / total
    greater = sum(counts[observed:]) / total
    return min(1.0, 2 * min(less, greater))


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


def levene_median_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Brown–Forsythe (Levene, center = median) p-value of two samples (each ≥ 2 values)."""
    med_b, med_n = _median(base), _median(new)
    return levene_deviations_p([abs(v - med_b) for v in base], [abs(v - med_n) for v in new])


def levene_deviations_p(dev_b: Values, dev_n: Values) -> float:
    """:func:`levene_median_p` from each sample's absolute deviations from its median."""
    groups = (dev_b, dev_n)
    sizes = [len(g) for g in groups]
    total = float(sum(sizes))
    zbar_i = [sum(floats(g)) / len(g) for g in groups]
    zbar = sum(n * z for n, z in zip(sizes, zbar_i, strict=True)) / total
    numer = (total - 2) * sum(n * (z - zbar) ** 2 for n, z in zip(sizes, zbar_i, strict=True))
    dvar = sum(sum_sq_dev(g, z) for g, z in zip(groups, zbar_i, strict=True))
    if dvar == 0.0:
        return math.nan
    w = numer / dvar  # (k - 1) = 1
    return f_sf_1(w, total - 2)


def sum_sq_dev(values: Values, center: float) -> float:
    """``sum([(v - center) ** 2 for v in values])``: the same floats added in the same
    order, with one ``**`` per distinct value (a judge score or a rate has a handful; the
    squares are looked up by numpy, the sum stays Python's left-to-right one). A list or a
    float array."""
    import numpy as np

    levels, inverse = np.unique(np.asarray(values, dtype=float), return_inverse=True)
    squares = np.array([(v - center) ** 2 for v in levels.tolist()], dtype=float)
    total: float = sum(squares[inverse.ravel()].tolist())
    return total


def floats(values: Values) -> Sequence[float]:
    """The values as Python floats (an array's ``tolist()``: Python's arithmetic on them)."""
    if isinstance(values, Sequence):
        return values
    out: list[float] = values.tolist()
    return out


def f_sf_1(w: float, dfd: float) -> float:
    """``P(F > w)`` for F(1, dfd): ``I_{dfd/(dfd+w)}(dfd/2, 1/2)``."""
    if w <= 0:
        return 1.0
    if math.isinf(w):
        return 0.0
    return betainc(dfd / 2.0, 0.5, dfd / (dfd + w))


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (a, b > 0)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, 1.0 - x) / b


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (modified Lentz; converges in
    O(√max(a, b)) terms for x below the mean)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-16:
            return h
    return h  # pragma: no cover - the fraction converges long before


def binom_two_sided_half(k: int, n: int) -> float:
    """``scipy.stats.binomtest(k, n, 0.5).pvalue`` (two-sided), exactly."""
    if n <= 0:
        raise ValueError("a binomial test needs n ≥ 1")
    if 2 * k == n:
        return 1.0
    low = min(k, n - k)
    tail = 0
    term = 1  # C(n, 0)
    for i in range(low + 1):
        tail += term
        term = term * (n - i) // (i + 1)
    return min(1.0, 2 * tail / (1 << n))
