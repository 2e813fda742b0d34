"""The comparison's column arithmetic (issue 14: `rag eval compare` of two 10,000-case
reports) gives the floats of the plain per-case loops, bit for bit.

The statistics run over whole float columns (numpy) where the result does not depend on the
order of the operations, and keep Python's left-to-right sums (and ``**``) where it does.
The reference here is the plain loop itself, written out as the formulas say (a mean is
``sum(values) / len(values)``, a variance ``sum([(v - m) ** 2 for v in values]) / (n - 1)``,
ranks are average ranks of ``|d|``…); equality is ``==`` on the floats, not approx. The
p-values against scipy are tests/unit/compare/test_stats_dist.py and test_compare_stats.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from app.errors import ReportError
from app.eval.compare import compare_reports, compare_views
from app.eval.compare.rows import metric_columns, tag_positions
from app.eval.stats import distributions, significance
from tests.unit.compare.conftest import build_report

# ---------------------------------------------------------------- the plain loops


def same(a: float, b: float) -> bool:
    """The same float (NaN and NaN alike)."""
    return a == b or (math.isnan(a) and math.isnan(b))


def ref_mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def ref_std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = ref_mean(values)
    return math.sqrt(sum([(v - m) ** 2 for v in values]) / (len(values) - 1))


def ref_median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


def ref_levene(dev_b: Sequence[float], dev_n: Sequence[float]) -> float:
    groups = (dev_b, dev_n)
    sizes = [len(g) for g in groups]
    total = float(sum(sizes))
    zbar_i = [sum(g) / len(g) for g in groups]
    zbar = sum(n * z for n, z in zip(sizes, zbar_i, strict=True)) / total
    numer = (total - 2) * sum(n * (z - zbar) ** 2 for n, z in zip(sizes, zbar_i, strict=True))
    dvar = sum(sum([(v - z) ** 2 for v in g]) for g, z in zip(groups, zbar_i, strict=True))
    if dvar == 0.0:
        return math.nan
    return distributions.f_sf_1(numer / dvar, total - 2)


def ref_brown_forsythe(base: Sequence[float], new: Sequence[float]) -> float:
    if len(base) < 2 or len(new) < 2:
        return 1.0
    med_b, med_n = ref_median(base), ref_median(new)
    dev_b = [abs(v - med_b) for v in base]
    dev_n = [abs(v - med_n) for v in new]
    if max(max(dev_b), max(dev_n)) - min(min(dev_b), min(dev_n)) < 1e-12:
        return 1.0
    if max(dev_b) - min(dev_b) < 1e-12 and max(dev_n) - min(dev_n) < 1e-12:
        return 0.0
    return ref_levene(dev_b, dev_n)


def ref_wilcoxon_asymptotic(base: Sequence[float], new: Sequence[float]) -> float:
    """Average ranks of |d| over the non-zero d, R+ and the tie-corrected normal tail."""
    diffs = [n - b for b, n in zip(base, new, strict=True)]
    if max(abs(d) for d in diffs) <= 1e-12:
        return 1.0
    nonzero = sorted((abs(d), d > 0) for d in diffs if d != 0)
    if not nonzero:
        return math.nan
    ranked: list[tuple[float, bool]] = []
    tie_correct, i = 0.0, 0
    while i < len(nonzero):
        j = i
        while j + 1 < len(nonzero) and nonzero[j + 1][0] == nonzero[i][0]:
            j += 1
        rank = (i + 1 + j + 1) / 2.0
        ranked.extend((rank, nonzero[k][1]) for k in range(i, j + 1))
        t = j - i + 1
        tie_correct += float(t**3 - t)
        i = j + 1
    r_plus = 0.0
    for rank, positive in ranked:
        if positive:
            r_plus += rank
    c = float(len(nonzero))
    mn = c * (c + 1.0) * 0.25
    se = math.sqrt((c * (c + 1.0) * (2.0 * c + 1.0) - tie_correct / 2) / 24)
    return distributions.normal_two_sided_p((r_plus - mn) / se)


def ref_mcnemar(base: Sequence[float], new: Sequence[float]) -> tuple[int, int]:
    moves = Counter(zip(base, new, strict=True))
    return moves[(0, 1)], moves[(1, 0)]


# ---------------------------------------------------------------- samples


def samples(seed: int, n: int, kind: str) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    if kind == "scores":  # 1-5 judge scores: few levels, many ties and zero differences
        base = rng.integers(1, 6, size=n).astype(float)
        new = np.clip(base + rng.choice([-1, 0, 0, 0, 1, 2], size=n), 1, 5)
    elif kind == "ratios":  # values whose sums round: the order of the additions matters
        levels = np.array([0.1, 0.2, 0.30000000000000004, 1 / 3, 2 / 3, 0.7, 1e-13, 0.0])
        base, new = rng.choice(levels, size=n), rng.choice(levels, size=n)
    elif kind == "wide":  # magnitudes far apart: every partial sum rounds differently
        base = rng.choice([1e17, 1.0, 1e-3, 3.3], size=n) * rng.choice([1.0, -1.0], size=n)
        new = base + rng.normal(0, 1e-2, size=n)
    else:  # "continuous": every value distinct
        base = rng.normal(0.5, 0.2, size=n)
        new = base + rng.normal(0.02, 0.1, size=n)
    return base.tolist(), new.tolist()


SAMPLES = [
    (seed, n, kind)
    for seed, n in [(1, 2), (2, 13), (3, 14), (4, 50), (5, 51), (6, 997), (7, 10_000)]
    for kind in ("scores", "ratios", "wide", "continuous")
]


@pytest.mark.parametrize(("seed", "n", "kind"), SAMPLES)
def test_means_and_spreads_are_the_loops_floats(seed: int, n: int, kind: str) -> None:
    base, new = samples(seed, n, kind)
    for values in (base, new):
        arr = np.asarray(values)
        assert significance.mean(arr) == ref_mean(values)
        assert significance.sample_std(arr) == ref_std(values)
        assert significance.sample_std(values) == ref_std(values)
        center = ref_mean(values)
        assert distributions.sum_sq_dev(arr, center) == sum([(v - center) ** 2 for v in values])
    ref = ref_brown_forsythe(base, new)
    assert same(significance.brown_forsythe_p(np.asarray(base), np.asarray(new)), ref)
    assert same(significance.brown_forsythe_p(base, new), ref)


@pytest.mark.parametrize(("seed", "n", "kind"), [s for s in SAMPLES if s[1] > 50])
def test_wilcoxon_by_columns_is_the_ranked_loop(seed: int, n: int, kind: str) -> None:
    base, new = samples(seed, n, kind)
    got = significance.wilcoxon_p(np.asarray(base), np.asarray(new))
    assert same(got, ref_wilcoxon_asymptotic(base, new))
    assert same(significance.wilcoxon_p(base, new), got)  # a list or an array: the same p


@pytest.mark.parametrize("n", [2, 13, 50, 51, 4000])
def test_mcnemar_counts_are_the_pair_counts(n: int) -> None:
    rng = np.random.default_rng(n)
    base = rng.integers(0, 2, size=n).astype(float)
    new = np.where(rng.random(n) < 0.2, 1.0 - base, base)
    new[0] = -0.0 if new[0] == 0 else new[0]  # -0.0 is a 0, as in the pair counts
    got = significance.mcnemar_exact(base, new)
    assert (got.up, got.down) == ref_mcnemar(base.tolist(), new.tolist())
    with pytest.raises(ValueError, match=r"0/1 values, got 0\.5"):
        significance.mcnemar_exact(np.append(base, 0.5), np.append(new, 1.0))


# ---------------------------------------------------------------- the table's columns


def test_rows_and_tags_are_the_loops_floats_with_undefined_values() -> None:
    """Null values drop a case from that metric only (and from its tags' breakdown); a case
    listing a tag twice counts twice in that tag, as the per-pair loop counted it."""
    n = 120
    rng = np.random.default_rng(3)
    base_f = rng.integers(1, 6, size=n).astype(float).tolist()
    new_f: list[float | None] = [max(1.0, b - 1.0) if i % 3 else b for i, b in enumerate(base_f)]
    for i in (4, 17, 18, 60):
        new_f[i] = None  # undefined in the new report: not a pair
    base_c: list[float | None] = [0.1 * (i % 7) for i in range(n)]
    new_c: list[float | None] = [0.1 * ((i + 1) % 7) for i in range(n)]
    base_c[9] = None
    tags = [["hr", "hr"] if i % 5 == 0 else (["it", "x"] if i % 2 else ["it"]) for i in range(n)]
    values = {"faithfulness": base_f, "correctness": base_c}
    cmp = compare_reports(
        build_report(values, tags=tags),
        build_report({"faithfulness": new_f, "correctness": new_c}, tags=tags),
    )
    rows = {r.metric: r for r in cmp.rows}
    for metric, bv, nv in (
        ("faithfulness", base_f, new_f),
        ("correctness", base_c, new_c),
    ):
        kept = [
            (i, b, m)
            for i, (b, m) in enumerate(zip(bv, nv, strict=True))
            if b is not None and m is not None
        ]
        b = [x for _, x, _ in kept]
        m = [y for _, _, y in kept]
        row = rows[metric]
        assert row.n == len(kept)
        assert (row.base_mean, row.new_mean) == (ref_mean(b), ref_mean(m))
        assert row.delta == ref_mean(m) - ref_mean(b)
        assert (row.base_std, row.new_std) == (ref_std(b), ref_std(m))
        assert row.p_value is not None and same(row.p_value, ref_wilcoxon_asymptotic(b, m))
        assert row.variance_p is not None and same(row.variance_p, ref_brown_forsythe(b, m))
        for t in (t for t in cmp.tag_regressions if t.metric == metric):
            members = [(x, y) for i, x, y in kept for tag in tags[i] if tag == t.tag]
            tb, tn = [x for x, _ in members], [y for _, y in members]
            assert t.n == len(members)
            assert (t.base_mean, t.new_mean) == (ref_mean(tb), ref_mean(tn))
            assert t.delta == ref_mean(tn) - ref_mean(tb)
    hr = next(t for t in cmp.tag_regressions if t.metric == "faithfulness" and t.tag == "hr")
    assert hr.n == 2 * len([i for i in range(n) if i % 5 == 0 and new_f[i] is not None])


def test_tag_positions_group_cases_by_tag_in_order() -> None:
    @dataclass
    class Case:
        tags: list[str]

    cases = {"a": Case(["x", "y"]), "b": Case(["y"]), "c": Case(["x", "y"]), "d": Case(["z", "z"])}
    got = tag_positions(["a", "b", "c", "d"], cases)  # type: ignore[arg-type]
    assert list(got) == ["x", "y", "z"]
    assert {k: v.tolist() for k, v in got.items()} == {"x": [0, 2], "y": [0, 1, 2], "z": [3, 3]}


@dataclass(frozen=True)
class _Score:
    value: float | None


@dataclass(frozen=True)
class _Case:
    id: str
    metrics: dict[str, _Score]
    tags: list[str] = field(default_factory=list)
    answer: str | None = None
    refused: bool | None = None


def test_columns_read_cases_in_any_metric_order_and_with_metrics_missing() -> None:
    cases_b = [
        _Case("1", {"a": _Score(1.0), "b": _Score(2.0)}),
        _Case("2", {"b": _Score(3.0), "a": _Score(4.0)}),  # another order
        _Case("3", {"a": _Score(5.0)}),  # b missing
        _Case("4", {"a": _Score(None), "b": _Score(6.0)}),
    ]
    cases_n = [_Case(c.id, {k: _Score(9.0) for k in ("a", "b")}) for c in cases_b]
    ids = [c.id for c in cases_b]
    cols = metric_columns(
        ids, [c.metrics for c in cases_b], [c.metrics for c in cases_n], ["a", "b"]
    )
    assert (list(cols["a"].ids), cols["a"].base.tolist()) == (["1", "2", "3"], [1.0, 4.0, 5.0])
    assert cols["a"].positions is not None and cols["a"].positions.tolist() == [0, 1, 2]
    assert (list(cols["b"].ids), cols["b"].base.tolist()) == (["1", "2", "4"], [2.0, 3.0, 6.0])
    assert cols["b"].new.tolist() == [9.0, 9.0, 9.0]


def test_a_nan_metric_value_is_refused_not_taken_for_undefined() -> None:
    summary = build_report({"faithfulness": [4.0, 5.0]})
    base = [
        _Case("kb-001", {"faithfulness": _Score(4.0)}),
        _Case("kb-002", {"faithfulness": _Score(5.0)}),
    ]
    new = [_Case("kb-001", {"faithfulness": _Score(math.nan)}), base[1]]
    with pytest.raises(ReportError, match="NaN"):
        compare_views(summary, base, summary, new)  # type: ignore[arg-type]
