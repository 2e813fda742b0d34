"""Pairing cases by id, the paired statistics and the verdict rules of one table row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from app.eval import stats_tests
from app.eval.compare.render import fmt_ids, fmt_p
from app.eval.compare.table import MetricDelta, TagRegression, Verdict
from app.eval.records import MetricInfo

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
    """What a comparison reads of a case: a :class:`~app.eval.records.CaseResult` or the
    lean :class:`~app.eval.report_stream.LeanCase`."""

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


def cases_by_id(cases: Sequence[C]) -> dict[str, C]:
    """The cases by id (both readers guarantee the ids are unique)."""
    return {case.id: case for case in cases}


def pairs(
    base_cases: Mapping[str, CaseView],
    new_cases: Mapping[str, CaseView],
    ids: Sequence[str],
    metric: str,
) -> list[Pair]:
    """``(id, base, new)`` for every case with a defined value in both reports."""
    return metric_pairs_of(
        ids, [base_cases[c].metrics for c in ids], [new_cases[c].metrics for c in ids], metric
    )


def metric_pairs_of(
    ids: Sequence[str],
    base_metrics: Sequence[Mapping[str, ScoreView]],
    new_metrics: Sequence[Mapping[str, ScoreView]],
    metric: str,
) -> list[Pair]:
    """:func:`pairs` from the paired cases' metric maps (in ``ids`` order, looked up once
    for all metrics)."""
    try:  # the usual report: every case lists every metric (null with a reason if undefined)
        bv = [m[metric].value for m in base_metrics]
        nv = [m[metric].value for m in new_metrics]
    except KeyError:
        pass
    else:
        return [
            (cid, b, n)
            for cid, b, n in zip(ids, bv, nv, strict=True)
            if b is not None and n is not None
        ]
    out: list[Pair] = []
    for cid, bm, nm in zip(ids, base_metrics, new_metrics, strict=True):
        bs = bm.get(metric)
        if bs is None:
            continue
        ns = nm.get(metric)
        if ns is None:
            continue
        b, n = bs.value, ns.value
        if b is not None and n is not None:
            out.append((cid, b, n))
    return out


def refusal_pairs(
    base_cases: Mapping[str, CaseView],
    new_cases: Mapping[str, CaseView],
    ids: Sequence[str],
) -> list[Pair]:
    out: list[Pair] = []
    for cid in ids:
        b, n = base_cases[cid].refused, new_cases[cid].refused
        if b is not None and n is not None:
            out.append((cid, float(b), float(n)))
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum([(v - m) ** 2 for v in values]) / (len(values) - 1))


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


def metric_cis(planned: Sequence[tuple[str, MetricInfo, Sequence[Pair]]]) -> dict[str, CI]:
    """The paired bootstrap CI of every continuous metric, by metric name, drawn together
    (:func:`app.eval.stats_tests.bootstrap_cis`: the CIs each metric's own draw gives)."""
    continuous = [(m, mp) for m, spec, mp in planned if spec.scale != "binary" and mp]
    cis = stats_tests.bootstrap_cis(
        [([b for _, b, _ in mp], [n for _, _, n in mp]) for _, mp in continuous]
    )
    return {m: ci for (m, _), ci in zip(continuous, cis, strict=True)}


def metric_row(
    metric: str,
    spec: MetricInfo,
    metric_pairs: Sequence[Pair],
    alpha: float,
    cis: Mapping[str, CI] | None = None,
) -> MetricDelta:
    """One row: the paired Δ, the test for the metric's scale, and the verdict
    (``cis``: the CIs :func:`metric_cis` drew; else this row's own draw)."""
    if not metric_pairs:
        return missing_row(metric, spec, "neither", "no_data", "no case has a value in both")
    base_v = [b for _, b, _ in metric_pairs]
    new_v = [n for _, _, n in metric_pairs]
    bmean, nmean = _mean(base_v), _mean(new_v)
    delta = nmean - bmean
    ci: CI | None = None
    discordant: tuple[int, int] | None = None
    variance_p: float | None = None
    if spec.scale == "binary":
        mc = stats_tests.mcnemar_exact(base_v, new_v)
        test, p, discordant = "mcnemar", mc.p_value, (mc.up, mc.down)
    else:
        test, p = "wilcoxon", stats_tests.wilcoxon_p(base_v, new_v)
        known = cis.get(metric) if cis is not None else None
        ci = known if known is not None else stats_tests.bootstrap_ci(base_v, new_v)
        variance_p = stats_tests.brown_forsythe_p(base_v, new_v)
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
    metric_pairs: Sequence[Pair],
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
    worse = [cid for cid, b, n in metric_pairs if sign * (n - b) < -1e-12]
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
    metric_pairs: Sequence[Pair],
    base_cases: Mapping[str, CaseView],
    alpha: float,
) -> list[TagRegression]:
    """Per tag of the base cases: the metric got worse there (significant or not)."""
    sign = _SIGN.get(spec.direction, 0.0)
    if sign == 0.0 or spec.group in COST_GROUPS:
        return []
    if all(b == n for _, b, n in metric_pairs):
        return []  # every tag's Δ is exactly 0: none got worse
    by_tag: dict[str, list[Pair]] = {}
    for pair in metric_pairs:
        for tag in base_cases[pair[0]].tags:
            by_tag.setdefault(tag, []).append(pair)
    out: list[TagRegression] = []
    for tag, tp in sorted(by_tag.items()):
        b = [x for _, x, _ in tp]
        n = [y for _, _, y in tp]
        delta = _mean(n) - _mean(b)
        if sign * delta >= -1e-12:
            continue
        if spec.scale == "binary":
            p = stats_tests.mcnemar_exact(b, n).p_value
        else:
            p = stats_tests.wilcoxon_p(b, n)
        out.append(
            TagRegression(
                tag=tag,
                metric=metric,
                n=len(tp),
                base_mean=_mean(b),
                new_mean=_mean(n),
                delta=delta,
                p_value=p,
                significant=p < alpha,
            )
        )
    return out
