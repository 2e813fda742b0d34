"""Pairing cases by id, the paired statistics and the verdict rules of one table row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from app.errors import ReportError
from app.eval.compare.render import fmt_ids, fmt_p
from app.eval.compare.table import LABEL, MetricDelta, TagRegression, Verdict
from app.eval.report.records import MetricInfo
from app.eval.stats import significance

# Metrics where "up" needs a human even when it is not significant (seed 004 §4.2: 拒答率 ⚠️).
REVIEW_WHEN_UP = ("refusal",)
# Derived from the cases' ``refused`` flags when the reports have no refusal-rate metric:
# seed 004 §4.2 lists 拒答率 in the table, ⚠️ when it moves (more refusals may be right or wrong).
REFUSAL_RATE = "refusal_rate"
REFUSAL_RATE_SPEC = MetricInfo(
    direction="none",
    kind="deterministic",
    unit="rate",
    scale="binary",
    red_line=False,
    description="share of cases refused, derived from each case's refused flag",
)
# Metric groups whose worsening is a cost, not a quality regression: ⚠️, never ❌.
COST_GROUPS = ("cost",)

Pair = tuple[str, float, float]  # case id, base value, new value
CI = tuple[float, float]
_SIGN = {"higher": 1.0, "lower": -1.0}


class ScoreView(Protocol):
    @property
    def value(self) -> float | None: ...


class CaseView(Protocol):
    """What a comparison reads of a case: a :class:`~app.eval.report.records.CaseResult` or the
    lean :class:`~app.eval.report.stream.LeanCase`."""

    @property
    def id(self) -> str: ...
    @property
    def tags(self) -> list[str]: ...
    @property
    def answer(self) -> str | None: ...
    @property
    def refused(self) -> bool | None: ...
    @property
    def metrics(self) -> Mapping[str, ScoreView]: ...


C = TypeVar("C", bound=CaseView)

if TYPE_CHECKING:
    from numpy.typing import NDArray


def cases_by_id(cases: Sequence[C]) -> dict[str, C]:
    """The cases by id (both readers guarantee the ids are unique)."""
    return {case.id: case for case in cases}


@dataclass(frozen=True)
class MetricPairs:
    """One metric's paired values: the ids of the paired cases where both reports define
    it and the two reports' values, in that order, as float arrays (whole columns: the
    statistics run over them in C). ``positions``: their indices in the paired ids
    (``None``: every paired case has the value, the usual report)."""

    ids: Sequence[str]
    base: NDArray[np.float64]
    new: NDArray[np.float64]
    positions: NDArray[np.intp] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def pairs(self) -> list[Pair]:
        """``(id, base, new)`` per case."""
        return list(zip(self.ids, self.base.tolist(), self.new.tolist(), strict=True))


def _value_matrix(
    metrics: Sequence[Mapping[str, ScoreView]], names: Sequence[str]
) -> NDArray[np.float64]:
    """``(cases × names)`` values, NaN where a case's value is undefined (None) or the
    case lacks the metric. A report lists every metric in every case, in one order: such
    a case's values are read in a row; any other case looks each name up."""
    flat: list[float | None] = []
    extend = flat.extend
    k = len(names)
    for m in metrics:
        if len(m) == k and list(m) == names:
            extend([s.value for s in m.values()])
        else:
            extend([None if (s := m.get(name)) is None else s.value for name in names])
    values = np.array(flat, dtype=float).reshape(len(metrics), k)  # None → NaN
    if int(np.isnan(values).sum()) != flat.count(None):
        raise ReportError("a metric value is NaN; an undefined value is null with a reason")
    return values


def kept_pairs(ids: Sequence[str], bv: NDArray[np.float64], nv: NDArray[np.float64]) -> MetricPairs:
    """The pairs where neither value is NaN (undefined), in ``ids`` order."""
    keep = ~(np.isnan(bv) | np.isnan(nv))
    if keep.all():
        return MetricPairs(ids, np.ascontiguousarray(bv), np.ascontiguousarray(nv))
    positions = np.flatnonzero(keep)
    return MetricPairs([ids[i] for i in positions.tolist()], bv[keep], nv[keep], positions)


def metric_columns(
    ids: Sequence[str],
    base_metrics: Sequence[Mapping[str, ScoreView]],
    new_metrics: Sequence[Mapping[str, ScoreView]],
    names: Sequence[str],
) -> dict[str, MetricPairs]:
    """Each metric's :class:`MetricPairs` from the paired cases' metric maps (in ``ids``
    order): the cases where both reports have a defined value."""
    names = list(names)
    bv, nv = _value_matrix(base_metrics, names), _value_matrix(new_metrics, names)
    return {name: kept_pairs(ids, bv[:, j], nv[:, j]) for j, name in enumerate(names)}


def pairs(
    base_cases: Mapping[str, CaseView],
    new_cases: Mapping[str, CaseView],
    ids: Sequence[str],
    metric: str,
) -> MetricPairs:
    """The cases of ``ids`` with a defined value of ``metric`` in both reports."""
    return metric_columns(
        ids, [base_cases[c].metrics for c in ids], [new_cases[c].metrics for c in ids], [metric]
    )[metric]


def refusal_pairs(
    base_cases: Mapping[str, CaseView],
    new_cases: Mapping[str, CaseView],
    ids: Sequence[str],
) -> MetricPairs:
    """The refused flags of both reports as 0/1 values (cases where both are known)."""
    bv = np.array([base_cases[cid].refused for cid in ids], dtype=float)  # None → NaN
    nv = np.array([new_cases[cid].refused for cid in ids], dtype=float)
    return kept_pairs(ids, bv, nv)


def tag_positions(
    ids: Sequence[str], base_cases: Mapping[str, CaseView]
) -> dict[str, NDArray[np.intp]]:
    """Each tag of the base cases (sorted) → the positions in ``ids`` of the cases it tags
    (:func:`tag_positions_of` of the cases' tag lists)."""
    codes: dict[tuple[str, ...], int] = {}
    of = [codes.setdefault(tuple(base_cases[cid].tags), len(codes)) for cid in ids]
    return tag_positions_of(np.array(of, dtype=np.int32), list(codes))


def tag_positions_of(
    codes: NDArray[np.int32], tag_lists: Sequence[tuple[str, ...]]
) -> dict[str, NDArray[np.intp]]:
    """Each tag (sorted) → the positions of the cases it tags (ascending; a tag listed twice
    by a case counts that case twice), from each case's tag-list code into ``tag_lists``:
    the same for every metric, so computed once per comparison."""
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    by_tag: dict[str, list[NDArray[np.intp]]] = {}
    for group in np.split(order, cuts) if len(order) else []:
        for tag in tag_lists[int(codes[group[0]])]:
            by_tag.setdefault(tag, []).append(group.astype(np.intp))
    return {
        tag: np.sort(np.concatenate(groups), kind="stable")
        for tag, groups in sorted(by_tag.items())
    }


_mean = significance.mean
_std = significance.sample_std


def missing_row(
    metric: str,
    spec: MetricInfo,
    where: str,
    verdict: Verdict = "review",
    reason: str | None = None,
) -> MetricDelta:
    return MetricDelta(
        metric=metric,
        direction=spec.direction,
        scale=spec.scale,
        unit=spec.unit,
        red_line=spec.red_line,
        n=0,
        base_mean=None,
        new_mean=None,
        delta=None,
        base_std=None,
        new_std=None,
        test="none",
        p_value=None,
        ci95=None,
        variance_p=None,
        discordant=None,
        verdict=verdict,
        reasons=(reason or f"only in the {where} report",),
    )


def metric_cis(planned: Sequence[tuple[str, MetricInfo, MetricPairs]]) -> dict[str, CI]:
    """The paired bootstrap CI of Δ of every metric (rates too), by metric name, drawn
    together (:func:`app.eval.stats.significance.bootstrap_cis`: the CIs each metric's own
    draw gives)."""
    drawn = [(m, mp) for m, _spec, mp in planned if len(mp)]
    cis = significance.bootstrap_cis([(mp.base, mp.new) for _, mp in drawn])
    return {m: ci for (m, _), ci in zip(drawn, cis, strict=True)}


@dataclass(frozen=True)
class Tested:
    """A metric's paired test: its name, p-value and McNemar's discordant pairs."""

    test: str
    p: float
    discordant: tuple[int, int] | None = None


def metric_test(spec: MetricInfo, metric_pairs: MetricPairs) -> Tested | None:
    """The paired test for the metric's scale (``None``: no pair to test)."""
    if not len(metric_pairs):
        return None
    if spec.scale == "binary":
        mc = significance.mcnemar_exact(metric_pairs.base, metric_pairs.new)
        return Tested("mcnemar", mc.p_value, (mc.up, mc.down))
    return Tested("wilcoxon", significance.wilcoxon_p(metric_pairs.base, metric_pairs.new))


@dataclass(frozen=True)
class RowContext:
    """What a row's verdict needs beyond its own pairs."""

    margin: float = 0.0  # thresholds.toml [margins]
    p_adjusted: float | None = None  # Holm across the table (None: the raw p)
    #: True per paired case (paired-id order) whose answer is identical in both reports
    same_answer: NDArray[np.bool_] | None = None
    #: why the row is not measured (an offline candidate/judge), with the command
    not_measured: str | None = None
    #: a judge row of a report judged by a weak judge (``meta.judge.weak``): why it is never
    #: ✅ (nor ❌: a weak judge never gates)
    weak_judge: str | None = None


def metric_row(
    metric: str,
    spec: MetricInfo,
    metric_pairs: MetricPairs,
    alpha: float,
    cis: Mapping[str, CI] | None = None,
    tested: Tested | None = None,
    ctx: RowContext | None = None,
) -> MetricDelta:
    """One row: the paired Δ, the test for the metric's scale, and the verdict
    (``cis``: the CIs :func:`metric_cis` drew, else this row's own draw; ``tested``: the
    :func:`metric_test` already run; ``ctx``: margin, Holm-adjusted p, answers, offline)."""
    ctx = ctx or RowContext()
    if not len(metric_pairs):
        reason = "no case has a value in both"
        if spec.unit == "s":  # a time: a cached call measured none
            reason = "no case measured in both: a cached answer carries no latency"
        return missing_row(metric, spec, "neither", "no_data", reason)
    tested = tested or metric_test(spec, metric_pairs)
    assert tested is not None
    base_v, new_v = metric_pairs.base, metric_pairs.new
    bmean, nmean = _mean(base_v), _mean(new_v)
    delta = nmean - bmean
    known = cis.get(metric) if cis is not None else None
    ci = known if known is not None else significance.bootstrap_ci(base_v, new_v)
    variance_p: float | None = None
    if spec.scale != "binary":
        variance_p = significance.brown_forsythe_p(base_v, new_v)
    diffs = new_v - base_v
    moved_mask = np.abs(diffs) > 1e-12
    moved = int(np.count_nonzero(moved_mask))
    sd_diff = _std(diffs)
    detectable = significance.detectable_effect(sd_diff, len(metric_pairs), alpha=alpha)
    needed = significance.cases_needed(sd_diff, ctx.margin, alpha=alpha)
    judge_only: int | None = None
    if spec.kind == "judge" and ctx.same_answer is not None:
        at = (
            np.flatnonzero(moved_mask)
            if metric_pairs.positions is None
            else metric_pairs.positions[moved_mask]
        )
        judge_only = int(np.count_nonzero(ctx.same_answer[at]))
    p_adj = tested.p if ctx.p_adjusted is None else ctx.p_adjusted
    bstd, nstd = _std(base_v), _std(new_v)
    row = MetricDelta(
        metric=metric,
        direction=spec.direction,
        scale=spec.scale,
        unit=spec.unit,
        red_line=spec.red_line,
        n=len(metric_pairs),
        base_mean=bmean,
        new_mean=nmean,
        delta=delta,
        base_std=bstd,
        new_std=nstd,
        test=tested.test,
        p_value=tested.p,
        ci95=ci,
        variance_p=variance_p,
        discordant=tested.discordant,
        verdict="no_data",
        reasons=(),
        margin=ctx.margin,
        p_adjusted=p_adj,
        detectable=detectable,
        cases_needed=needed,
        judge_only=judge_only,
        moved=moved,
    )
    verdict, reasons = _verdict(metric, spec, metric_pairs, alpha, row, ctx)
    if ctx.weak_judge is not None and verdict not in ("red_line", "not_measured", "no_data"):
        reasons = [ctx.weak_judge, f"with a strong judge this would read: {LABEL[verdict]}"]
        verdict = "weak_judge"
    return replace(row, verdict=verdict, reasons=tuple(reasons))


def _verdict(
    metric: str,
    spec: MetricInfo,
    metric_pairs: MetricPairs,
    alpha: float,
    row: MetricDelta,
    ctx: RowContext,
) -> tuple[Verdict, list[str]]:
    """The verdict rules (module docstring of :mod:`app.eval.compare`), in order: red line;
    not measured (offline); judge drift; no meaningful change (CI strictly inside ±margin);
    regression / cost review / better (Holm-adjusted p < α); a metric without a good
    direction or a refusal rate that rose: review; a spread that grew: review; else
    inconclusive, with the smallest detectable effect and the cases that would resolve it."""
    assert row.delta is not None and row.ci95 is not None and row.p_adjusted is not None
    delta, nmean, p_adj = row.delta, row.new_mean or 0.0, row.p_adjusted
    lo, hi = row.ci95
    sign = _SIGN.get(spec.direction, 0.0)
    gain = sign * delta  # > 0: better
    significant = p_adj < alpha and not math.isclose(delta, 0.0, abs_tol=1e-12)
    worse: list[str] = []
    if spec.red_line:  # the cases where ``sign * (new - base) < -1e-12``
        moved = sign * (metric_pairs.new - metric_pairs.base) < -1e-12
        worse = [metric_pairs.ids[i] for i in np.flatnonzero(moved).tolist()]
    limit = 0.0 if spec.direction == "lower" else None  # a red line's limit
    over_limit = spec.red_line and limit is not None and nmean > limit
    if spec.red_line and (worse or over_limit):
        reasons = [f"worse on {len(worse)} case(s): {fmt_ids(worse)}"] if worse else []
        if over_limit:
            reasons.append(f"new {nmean:.3g} beyond the red line {limit}")
        return "red_line", reasons
    if ctx.not_measured is not None:
        return "not_measured", [ctx.not_measured]
    m = ctx.margin
    inside = (-m < lo and hi < m) or (m == 0.0 and lo == hi == 0.0)
    if (
        row.judge_only is not None
        and row.moved
        and row.judge_only == row.moved
        and not (inside and not significant)
    ):
        return "judge_drift", [
            f"all {row.moved} moved case(s) have an identical answer in both runs: the judge "
            "moved, not the answers (re-judge both runs with one judge, or raise "
            "--judge-samples)"
        ]
    if sign != 0.0 and significant and gain < 0 and spec.group in COST_GROUPS:
        return "review", [f"{metric} worse: a cost, not a quality regression"]
    if sign != 0.0 and significant and gain < 0 and not inside:
        return "regression", [f"Holm {fmt_p(p_adj)} < α={alpha}"]
    if not inside and delta > 1e-12 and any(key in metric.lower() for key in REVIEW_WHEN_UP):
        return "review", [f"{metric} up: more refusals may be right or wrong"]
    if not inside and sign == 0.0 and abs(delta) > 1e-12:
        return "review", ["changed; this metric has no better direction"]
    verdict: Verdict
    if inside:  # significant or not, smaller than the margin
        verdict, reasons = "no_change", [_inside(row, m)]
    elif sign != 0.0 and significant and gain > 0:
        verdict, reasons = "better", []
    else:
        verdict, reasons = "inconclusive", [f"CI crosses ±{_fmt_margin(row, m)}"]
        if row.detectable is not None and math.isfinite(row.detectable):
            reasons.append(f"smallest detectable Δ {_fmt_amount(row, row.detectable)} at n={row.n}")
        if row.cases_needed is not None:
            reasons.append(f"≈{row.cases_needed} cases would resolve ±{_fmt_margin(row, m)}")
    if (  # seed 004 §12.3: the mean held but the spread grew — a degradation to look at
        verdict != "better"
        and row.variance_p is not None
        and row.variance_p < alpha
        and (row.new_std or 0.0) > (row.base_std or 0.0)
    ):
        return "review", [
            *reasons,
            f"variance up (std {row.base_std:.3g} → {row.new_std:.3g}, "
            f"Brown–Forsythe {fmt_p(row.variance_p)})",
        ]
    return verdict, reasons


def _fmt_amount(row: MetricDelta, value: float) -> str:
    if row.scale == "binary" or row.unit == "rate":
        return f"{value * 100:.1f} pp"
    return f"{value:.2g}"


def _fmt_margin(row: MetricDelta, margin: float) -> str:
    return "0" if margin == 0 else _fmt_amount(row, margin)


def _inside(row: MetricDelta, margin: float) -> str:
    return "unchanged on every case" if margin == 0 else f"CI inside ±{_fmt_margin(row, margin)}"


def tag_tests(
    metric: str,
    spec: MetricInfo,
    metric_pairs: MetricPairs,
    tags: Mapping[str, NDArray[np.intp]],
) -> list[TagRegression]:
    """Per tag of the base cases: the metric's paired test on the tag's cases (every
    tag × metric pair: the family Benjamini–Hochberg adjusts; ``significant`` and
    ``q_value`` are set by :func:`adjust_tags`). ``tags``: :func:`tag_positions` of the
    paired ids. A metric without a good direction or a cost metric has no breakdown."""
    sign = _SIGN.get(spec.direction, 0.0)
    if sign == 0.0 or spec.group in COST_GROUPS or not len(metric_pairs):
        return []
    base_v, new_v = metric_pairs.base, metric_pairs.new
    unchanged = bool(np.array_equal(base_v, new_v))  # every tag's Δ is 0 and its p 1
    at: NDArray[np.intp] | None = None  # paired position → index in the metric's columns
    if metric_pairs.positions is not None:
        at = np.full(int(metric_pairs.positions.max()) + 1, -1, dtype=np.intp)
        at[metric_pairs.positions] = np.arange(len(metric_pairs.positions))
    out: list[TagRegression] = []
    for tag, positions in tags.items():
        idx = positions
        if at is not None:
            idx = at[positions[positions < len(at)]]
            idx = idx[idx >= 0]
        if not len(idx):
            continue
        b, n = base_v[idx], new_v[idx]
        bmean, nmean = _mean(b), _mean(n)
        delta = nmean - bmean
        if unchanged:
            p = 1.0
        elif spec.scale == "binary":
            p = significance.mcnemar_exact(b, n).p_value
        else:
            p = significance.wilcoxon_p(b, n)
        out.append(
            TagRegression(
                tag=tag,
                metric=metric,
                n=len(idx),
                base_mean=bmean,
                new_mean=nmean,
                delta=delta,
                p_value=p,
                significant=False,
                worse=sign * delta < -1e-12,
            )
        )
    return out


def adjust_tags(tests: Sequence[TagRegression], alpha: float) -> list[TagRegression]:
    """The tag × metric pairs that got worse, with their Benjamini–Hochberg q-values across
    every pair tested (better and unchanged ones included) and ``significant`` = q < α."""
    qs = significance.benjamini_hochberg([t.p_value or 1.0 for t in tests])
    return [
        replace(t, q_value=q, significant=q < alpha)
        for t, q in zip(tests, qs, strict=True)
        if t.worse
    ]
