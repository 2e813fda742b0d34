"""Pairing cases by id, the paired statistics and the verdict rules of one table row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from app.errors import ReportError
from app.eval.compare.render import fmt_ids, fmt_p
from app.eval.compare.table import MetricDelta, TagRegression, Verdict
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


def _kept(ids: Sequence[str], bv: NDArray[np.float64], nv: NDArray[np.float64]) -> MetricPairs:
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
    return {name: _kept(ids, bv[:, j], nv[:, j]) for j, name in enumerate(names)}


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
    return _kept(ids, bv, nv)


def tag_positions(
    ids: Sequence[str], base_cases: Mapping[str, CaseView]
) -> dict[str, NDArray[np.intp]]:
    """Each tag of the base cases (sorted) → the positions in ``ids`` of the cases it tags
    (ascending; a tag listed twice by a case counts that case twice): the same for every
    metric, so computed once per comparison (cases grouped by their tag list first)."""
    by_tags: dict[tuple[str, ...], list[int]] = {}
    for i, cid in enumerate(ids):
        by_tags.setdefault(tuple(base_cases[cid].tags), []).append(i)
    by_tag: dict[str, list[list[int]]] = {}
    for tags, positions in by_tags.items():
        for tag in tags:
            by_tag.setdefault(tag, []).append(positions)
    return {
        tag: np.sort(np.concatenate([np.asarray(p, dtype=np.intp) for p in groups]), kind="stable")
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
    """The paired bootstrap CI of every continuous metric, by metric name, drawn together
    (:func:`app.eval.stats.significance.bootstrap_cis`: the CIs each metric's own draw gives)."""
    continuous = [(m, mp) for m, spec, mp in planned if spec.scale != "binary" and len(mp)]
    cis = significance.bootstrap_cis([(mp.base, mp.new) for _, mp in continuous])
    return {m: ci for (m, _), ci in zip(continuous, cis, strict=True)}


def metric_row(
    metric: str,
    spec: MetricInfo,
    metric_pairs: MetricPairs,
    alpha: float,
    cis: Mapping[str, CI] | None = None,
) -> MetricDelta:
    """One row: the paired Δ, the test for the metric's scale, and the verdict
    (``cis``: the CIs :func:`metric_cis` drew; else this row's own draw)."""
    if not len(metric_pairs):
        return missing_row(metric, spec, "neither", "no_data", "no case has a value in both")
    base_v, new_v = metric_pairs.base, metric_pairs.new
    bmean, nmean = _mean(base_v), _mean(new_v)
    delta = nmean - bmean
    ci: CI | None = None
    discordant: tuple[int, int] | None = None
    variance_p: float | None = None
    if spec.scale == "binary":
        mc = significance.mcnemar_exact(base_v, new_v)
        test, p, discordant = "mcnemar", mc.p_value, (mc.up, mc.down)
    else:
        test, p = "wilcoxon", significance.wilcoxon_p(base_v, new_v)
        known = cis.get(metric) if cis is not None else None
        ci = known if known is not None else significance.bootstrap_ci(base_v, new_v)
        variance_p = significance.brown_forsythe_p(base_v, new_v)
    bstd, nstd = _std(base_v), _std(new_v)
    verdict, reasons, final = _verdict(metric, spec, metric_pairs, alpha, p, delta, nmean)
    if not final and variance_p is not None and variance_p < alpha and nstd > bstd:
        verdict = "review"
        reasons.append(
            f"variance up (std {bstd:.3g} → {nstd:.3g}, Brown–Forsythe {fmt_p(variance_p)})"
        )
    return MetricDelta(
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
        test=test,
        p_value=p,
        ci95=ci,
        variance_p=variance_p,
        discordant=discordant,
        verdict=verdict,
        reasons=tuple(reasons),
    )


def _verdict(
    metric: str,
    spec: MetricInfo,
    metric_pairs: MetricPairs,
    alpha: float,
    p: float,
    delta: float,
    nmean: float,
) -> tuple[Verdict, list[str], bool]:
    """The verdict rules (module docstring of :mod:`app.eval.compare`) before the variance
    check, and whether they are final: a red line, a regression and a cost review are; the
    variance check may still turn the others into a review."""
    sign = _SIGN.get(spec.direction, 0.0)
    gain = sign * delta  # > 0: better
    significant = p < alpha and not math.isclose(delta, 0.0, abs_tol=1e-12)
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
        return "red_line", reasons, True
    if sign != 0.0 and significant and gain < 0 and spec.group in COST_GROUPS:
        return "review", [f"{metric} worse: a cost, not a quality regression"], True
    if sign != 0.0 and significant and gain < 0:
        return "regression", [f"{fmt_p(p)} < α={alpha}"], True
    if delta > 1e-12 and any(key in metric.lower() for key in REVIEW_WHEN_UP):
        return "review", ["refusal rate up"], False
    if sign == 0.0 and abs(delta) > 1e-12:
        return "review", ["changed; this metric has no better direction"], False
    better = sign != 0.0 and significant and gain > 0
    return ("better" if better else "within_noise"), [], False


def tag_regressions(
    metric: str,
    spec: MetricInfo,
    metric_pairs: MetricPairs,
    tags: Mapping[str, NDArray[np.intp]],
    alpha: float,
) -> list[TagRegression]:
    """Per tag of the base cases: the metric got worse there (significant or not).
    ``tags``: :func:`tag_positions` of the paired ids."""
    sign = _SIGN.get(spec.direction, 0.0)
    if sign == 0.0 or spec.group in COST_GROUPS:
        return []
    base_v, new_v = metric_pairs.base, metric_pairs.new
    if np.array_equal(base_v, new_v):
        return []  # every tag's Δ is exactly 0: none got worse
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
        if sign * delta >= -1e-12:
            continue
        if spec.scale == "binary":
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
                significant=p < alpha,
            )
        )
    return out
