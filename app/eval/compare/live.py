"""Judge a rollout's arms on live traffic: the answer log and its feedback, candidate vs control.

For one prompt under a staged rollout (``releases.toml``'s ``rollout``; each answer-log line
names the arm that served it), every metric is compared between the arms with the same
verdict vocabulary as ``rag eval compare`` (:mod:`app.eval.compare.table`):

==================  =========  =============================================================
metric              better     worse, when significant
==================  =========  =============================================================
👎 rate             lower      ❌ regression (answers 👎'd within 10 min; younger: not yet)
citation validity   higher     ❌ regression (valid [n] / all [n] of answers that cite)
refusal rate        lower      ⚠️ review: refusal rate up (refusing may be right)
latency (mean)      lower      ⚠️ review: a cost, not a quality regression (p50/p95 shown)
cost per answer     lower      ⚠️ review: a cost
==================  =========  =============================================================

Otherwise ✅ better (significant in the good direction), ✅ no meaningful change (the interval
lies inside the metric's ±margin: 1 pp for the 👎 and citation rates, 2 pp for refusals,
100 ms, $0.0005) or ⚠️ inconclusive (not enough traffic yet to tell).

The unit is the user (an answer without a user id is its own unit): a user's answers are
averaged first, so a heavy user counts once. Users seen in both arms (arms chosen per session,
or a rollout whose share grew) are *paired* (their per-user difference), the others unpaired
(two independent samples); the two estimates are combined by inverse variance.

Significance is always-valid (:mod:`app.eval.stats.sequential`: the mixture SPRT and its
confidence sequence), looked at every hour of the window: the interval reported is the
running intersection of the hourly confidence sequences, and a metric is flagged when it
excludes 0 — at any look — with a false-alarm rate ≤ α however often someone looks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np

from app.errors import UserError
from app.eval.compare.table import LABEL, SYMBOL, Verdict
from app.eval.stats import sequential
from app.generation.registry.releases import Release, Releases, parse_since
from app.generation.registry.rollout import Evidence, plan_of, stage_index
from app.ops.logs import AnswerLog, AnswerRecord

Kind = Literal["quality", "refusal", "cost"]
LOOK_EVERY = timedelta(hours=1)
FEEDBACK_WINDOW = timedelta(minutes=10)  # a 👎 counts when given within this of the answer


@dataclass(frozen=True)
class MetricSpec:
    key: str
    label: str
    direction: Literal["lower", "higher"]
    kind: Kind
    unit: str = ""
    margin: float = 0.0  # a change within ±margin is no meaningful change


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("thumbs_down_rate", "👎 rate", "lower", "quality", "%", 0.01),
    MetricSpec("refusal_rate", "refusal rate", "lower", "refusal", "%", 0.02),
    MetricSpec("citation_validity", "citation validity", "higher", "quality", "%", 0.01),
    MetricSpec("latency_ms", "latency (mean)", "lower", "cost", "ms", 100.0),
    MetricSpec("cost_usd", "cost per answer", "lower", "cost", "$", 0.0005),
)


@dataclass(frozen=True)
class ArmSummary:
    arm: str
    versions: tuple[str, ...]
    answers: int
    users: int
    thumbs_down_rate: float | None
    refusal_rate: float | None
    citation_validity: float | None
    latency_p50: float | None
    latency_p95: float | None
    latency_mean: float | None
    cost_mean: float | None


@dataclass(frozen=True)
class LiveMetric:
    metric: str
    label: str
    direction: str
    control: float | None
    candidate: float | None
    delta: float | None  # candidate − control, of per-user means
    interval: tuple[float, float] | None  # running intersection of the confidence sequences
    p_value: float | None  # always-valid
    paired_users: int
    unpaired_users: int
    verdict: Verdict
    reasons: tuple[str, ...] = ()

    @property
    def symbol(self) -> str:
        return SYMBOL[self.verdict]


@dataclass(frozen=True)
class Look:
    at: str
    answers: dict[str, int]
    thumbs_down_rate: dict[str, float | None]
    refusal_rate: dict[str, float | None]
    delta: float | None  # 👎 rate, candidate − control
    low: float | None
    high: float | None


@dataclass(frozen=True)
class LiveComparison:
    prompt_id: str
    start: str
    end: str
    alpha: float
    method: str
    arms: dict[str, ArmSummary]
    metrics: tuple[LiveMetric, ...]
    looks: tuple[Look, ...] = field(default=())

    @property
    def regressions(self) -> tuple[str, ...]:
        return tuple(m.label for m in self.metrics if m.verdict == "regression")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["regressions"] = list(self.regressions)
        for m in data["metrics"]:
            m["symbol"] = SYMBOL[m["verdict"]]
        return data


def method(look_every: timedelta) -> str:
    minutes = look_every.total_seconds() / 60
    every = f"{minutes / 60:g} h" if minutes >= 60 else f"{minutes:g} min"
    return (
        "mixture SPRT (Johari et al.; normal mixture τ = "
        f"{sequential.TAU_SD:g} pooled sd), always-valid under any number of looks; "
        f"confidence sequences intersected over looks every {every}; a 👎 counts within "
        f"{FEEDBACK_WINDOW.total_seconds() / 60:g} min of its answer"
    )


# -- reading the log ---------------------------------------------------------------------------


@dataclass
class _Rows:
    """One row per answer of the window that a rollout arm served, in time order."""

    ts: np.ndarray  # seconds since the window start
    arm: np.ndarray  # 0 control, 1 candidate
    unit: np.ndarray  # user index
    down_at: np.ndarray  # seconds of the first 👎 (inf: none)
    refused: np.ndarray
    cite: np.ndarray  # valid share of citations (nan: no citation)
    latency: np.ndarray
    cost: np.ndarray  # nan: not recorded
    versions: dict[str, set[str]]


def _rows(
    log: AnswerLog, prompt_id: str, start: datetime, end: datetime, candidate: str | None
) -> tuple[_Rows, list[AnswerRecord]]:
    picked: list[tuple[AnswerRecord, int]] = []
    versions: dict[str, set[str]] = {"control": set(), "candidate": set()}
    for rec in log.answers:
        arm = rec.arm_of(prompt_id)
        if arm is None or arm.arm == "pinned":
            continue
        when = rec.when
        if when < start or when > end:
            continue
        if arm.arm == "candidate" and candidate is not None and arm.version != candidate:
            continue
        side = 1 if arm.arm == "candidate" else 0
        versions[arm.arm].add(arm.version)
        picked.append((rec, side))
    picked.sort(key=lambda p: p[0].when)
    first_down: dict[str, datetime] = {}
    for fb in log.feedback:
        if fb.rating == "down":
            w = fb.when
            if fb.trace_id not in first_down or w < first_down[fb.trace_id]:
                first_down[fb.trace_id] = w
    units: dict[str, int] = {}
    n = len(picked)
    rows = _Rows(
        ts=np.empty(n),
        arm=np.empty(n, dtype=np.int8),
        unit=np.empty(n, dtype=np.int64),
        down_at=np.full(n, np.inf),
        refused=np.empty(n),
        cite=np.full(n, np.nan),
        latency=np.empty(n),
        cost=np.full(n, np.nan),
        versions=versions,
    )
    for i, (rec, side) in enumerate(picked):
        rows.ts[i] = (rec.when - start).total_seconds()
        rows.arm[i] = side
        key = rec.user if rec.user is not None else f"trace:{rec.trace_id}"
        rows.unit[i] = units.setdefault(key, len(units))
        down = first_down.get(rec.trace_id)
        if down is not None and down <= end:
            rows.down_at[i] = (down - start).total_seconds()
        rows.refused[i] = float(rec.refused)
        cited = len(rec.citations) + len(rec.invalid_citations)
        if cited:
            rows.cite[i] = len(rec.citations) / cited
        rows.latency[i] = rec.latency_ms
        if rec.cost_usd is not None:
            rows.cost[i] = rec.cost_usd
    return rows, [p[0] for p in picked]


def _values(rows: _Rows, key: str, at: float) -> np.ndarray:
    """Each answer's value at the look ``at`` (nan: none). The 👎 of an answer is whether it
    got one within :data:`FEEDBACK_WINDOW`; an answer younger than that at the look has no
    value yet, so every look measures the same thing however recent its answers."""
    if key == "thumbs_down_rate":
        window = FEEDBACK_WINDOW.total_seconds()
        down = (rows.down_at - rows.ts <= window).astype(float)
        return np.where(rows.ts <= at - window, down, np.nan)
    return {
        "refusal_rate": rows.refused,
        "citation_validity": rows.cite,
        "latency_ms": rows.latency,
        "cost_usd": rows.cost,
    }[key]


def _unit_means(
    rows: _Rows, values: np.ndarray, mask: np.ndarray, n_units: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit mean of ``values`` in each arm (nan where the unit has none): shape (2, units)."""
    ok = mask & ~np.isnan(values)
    means = np.full((2, n_units), np.nan)
    for side in (0, 1):
        sel = ok & (rows.arm == side)
        sums = np.bincount(rows.unit[sel], weights=values[sel], minlength=n_units)
        counts = np.bincount(rows.unit[sel], minlength=n_units)
        with np.errstate(invalid="ignore", divide="ignore"):
            means[side] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return means[0], means[1]


def estimate(
    control: np.ndarray, candidate: np.ndarray
) -> tuple[tuple[float, float, float] | None, int, int]:
    """(θ̂, V, sd) from per-unit means of the two arms (nan: not in that arm), the number
    of paired units and of unpaired ones."""
    both = ~np.isnan(control) & ~np.isnan(candidate)
    only_a = ~np.isnan(control) & np.isnan(candidate)
    only_b = np.isnan(control) & ~np.isnan(candidate)
    parts = []
    pair = sequential.paired(candidate[both] - control[both])
    if pair is not None:
        parts.append(pair)
    unpaired = sequential.two_sample(control[only_a], candidate[only_b])
    if unpaired is not None:
        parts.append(unpaired)
    return sequential.combine(parts), int(both.sum()), int(only_a.sum() + only_b.sum())


def _verdict(spec: MetricSpec, low: float, high: float, delta: float) -> tuple[Verdict, list[str]]:
    sign = -1.0 if spec.direction == "lower" else 1.0
    worse = (sign < 0 and low > 0) or (sign > 0 and high < 0)
    better = (sign < 0 and high < 0) or (sign > 0 and low > 0)
    if worse and spec.kind == "quality":
        return "regression", ["the confidence sequence excludes 0"]
    if worse and spec.kind == "refusal":
        return "review", ["refusal rate up"]
    if worse:
        return "review", [f"{spec.label} worse: a cost, not a quality regression"]
    if better:
        return "better", []
    if -spec.margin <= low and high <= spec.margin:
        return "no_change", [
            f"the interval lies inside ±{_fmt_delta(spec.margin, spec.unit).lstrip('+')}"
        ]
    return "inconclusive", [
        f"the interval still allows changes beyond ±{_fmt_delta(spec.margin, spec.unit).lstrip('+')}"
    ]


def _share(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else None


def _quantile(values: np.ndarray, q: float) -> float | None:
    return float(np.quantile(values, q, method="inverted_cdf")) if values.size else None


def compare_arms(
    log: AnswerLog,
    prompt_id: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    alpha: float = sequential.ALPHA,
    look_every: timedelta = LOOK_EVERY,
    candidate: str | None = None,
) -> LiveComparison:
    """The arms of ``prompt_id``'s rollout compared on the log's window (default: its first
    to its last answer), looked at every ``look_every``; ``candidate`` (a qualified version)
    when the window holds more than one."""
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    served = [a for a in log.answers if a.arm_of(prompt_id) is not None]
    if not served:
        known = sorted({p for a in log.answers for p in a.arms})
        raise UserError(
            f"{log.path}: no answer names an arm of {prompt_id} — was it under a rollout "
            f"(`rag prompts canary`) while this log was written? Prompts with arms here: "
            f"{', '.join(known) or 'none'}"
        )
    start = since or min(a.when for a in served)
    end = until or max(a.when for a in served)
    if end <= start:
        raise UserError(f"the window {start.isoformat()} … {end.isoformat()} is empty")
    candidates = sorted(
        {
            arm.version
            for a in served
            if (arm := a.arm_of(prompt_id)) is not None
            and arm.arm == "candidate"
            and start <= a.when <= end
        }
    )
    if candidate is None and len(candidates) > 1:
        raise UserError(
            f"{log.path}: the window holds {len(candidates)} candidates of {prompt_id} "
            f"({', '.join(candidates)}) — choose one with --candidate, or narrow --since/--until"
        )
    rows, _ = _rows(log, prompt_id, start, end, candidate)
    n_units = int(rows.unit.max()) + 1 if rows.unit.size else 0
    span = (end - start).total_seconds()
    step = look_every.total_seconds()
    look_times = [min(step * k, span) for k in range(1, math.ceil(span / step) + 1)] or [span]
    low = {m.key: -math.inf for m in METRICS}
    high = {m.key: math.inf for m in METRICS}
    lrs: dict[str, list[float]] = {m.key: [] for m in METRICS}
    last: dict[str, tuple[tuple[float, float, float] | None, int, int]] = {}
    looks: list[Look] = []
    for at in look_times:
        mask = rows.ts <= at
        trend: dict[str, dict[str, float | None]] = {}
        for spec in METRICS:
            values = _values(rows, spec.key, at)
            control_means, candidate_means = _unit_means(rows, values, mask, n_units)
            est, n_pair, n_unpair = estimate(control_means, candidate_means)
            last[spec.key] = (est, n_pair, n_unpair)
            if spec.key in ("thumbs_down_rate", "refusal_rate"):
                trend[spec.key] = {
                    "control": _share(values[mask & (rows.arm == 0)]),
                    "candidate": _share(values[mask & (rows.arm == 1)]),
                }
            if est is None:
                continue
            theta, var, sd = est
            tau2 = sequential.tau2_for(sd)
            r = float(sequential.radius(var, tau2, alpha))
            low[spec.key] = max(low[spec.key], theta - r)
            high[spec.key] = min(high[spec.key], theta + r)
            lrs[spec.key].append(float(sequential.mixture_lr(theta, var, tau2)))
            if spec.key == "thumbs_down_rate":
                trend["_ci"] = {"delta": theta, "low": theta - r, "high": theta + r}
        ci = trend.get("_ci", {})
        looks.append(
            Look(
                at=(start + timedelta(seconds=at)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                answers={
                    "control": int((mask & (rows.arm == 0)).sum()),
                    "candidate": int((mask & (rows.arm == 1)).sum()),
                },
                thumbs_down_rate=trend["thumbs_down_rate"],
                refusal_rate=trend["refusal_rate"],
                delta=ci.get("delta"),
                low=ci.get("low"),
                high=ci.get("high"),
            )
        )
    metrics: list[LiveMetric] = []
    for spec in METRICS:
        values = _values(rows, spec.key, span)
        est, n_pair, n_unpair = last[spec.key]
        a_mean = _share(values[rows.arm == 0])
        b_mean = _share(values[rows.arm == 1])
        if est is None or not lrs[spec.key]:
            metrics.append(
                LiveMetric(
                    spec.key,
                    spec.label,
                    spec.direction,
                    a_mean,
                    b_mean,
                    None,
                    None,
                    None,
                    n_pair,
                    n_unpair,
                    "no_data",
                    ("fewer than 2 users in an arm",),
                )
            )
            continue
        lo, hi = low[spec.key], high[spec.key]
        p = float(sequential.always_valid_p(np.array(lrs[spec.key]))[-1])
        verdict, reasons = _verdict(spec, lo, hi, est[0])
        metrics.append(
            LiveMetric(
                spec.key,
                spec.label,
                spec.direction,
                a_mean,
                b_mean,
                est[0],
                (lo, hi),
                p,
                n_pair,
                n_unpair,
                verdict,
                tuple(reasons),
            )
        )
    arms = {
        name: _summary(rows, name, side, span) for name, side in (("control", 0), ("candidate", 1))
    }
    return LiveComparison(
        prompt_id,
        start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        alpha,
        method(look_every),
        arms,
        tuple(metrics),
        tuple(looks),
    )


def _summary(rows: _Rows, name: str, side: int, span: float) -> ArmSummary:
    sel = rows.arm == side
    lat = rows.latency[sel]
    down = _values(rows, "thumbs_down_rate", span)[sel]
    return ArmSummary(
        arm=name,
        versions=tuple(sorted(rows.versions[name])),
        answers=int(sel.sum()),
        users=int(np.unique(rows.unit[sel]).size),
        thumbs_down_rate=_share(down),
        refusal_rate=_share(rows.refused[sel]),
        citation_validity=_share(rows.cite[sel]),
        latency_p50=_quantile(lat, 0.5),
        latency_p95=_quantile(lat, 0.95),
        latency_mean=_share(lat),
        cost_mean=_share(rows.cost[sel]),
    )


# -- rendering ---------------------------------------------------------------------------------


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "%":
        return f"{value * 100:.2f} %"
    if unit == "$":
        return f"${value:.5f}"
    return f"{value:.0f} {unit}".strip()


def _fmt_delta(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "%":
        return f"{value * 100:+.2f} pp"
    if unit == "$":
        return f"{value:+.5f} $"
    return f"{value:+.0f} {unit}".strip()


def markdown(cmp: LiveComparison, *, trend: bool = False) -> str:
    a, b = cmp.arms["control"], cmp.arms["candidate"]
    lines = [
        f"# A/B: {cmp.prompt_id} — candidate {', '.join(b.versions) or '–'} vs control "
        f"{', '.join(a.versions) or '–'}",
        "",
        f"window {cmp.start} … {cmp.end}; control {a.answers} answers / {a.users} users, "
        f"candidate {b.answers} answers / {b.users} users",
        f"latency p50/p95: control {_fmt(a.latency_p50, 'ms')} / {_fmt(a.latency_p95, 'ms')}, "
        f"candidate {_fmt(b.latency_p50, 'ms')} / {_fmt(b.latency_p95, 'ms')}",
        "",
        f"| metric | control | candidate | Δ | {100 * (1 - cmp.alpha):g} % always-valid CI | p (always-valid) | users paired/unpaired | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    units = {m.key: m.unit for m in METRICS}
    for m in cmp.metrics:
        unit = units[m.metric]
        ci = (
            f"[{_fmt_delta(m.interval[0], unit)}, {_fmt_delta(m.interval[1], unit)}]"
            if m.interval is not None
            else "–"
        )
        p = f"{m.p_value:.3g}" if m.p_value is not None else "–"
        why = f" ({'; '.join(m.reasons)})" if m.reasons else ""
        lines.append(
            f"| {m.label} | {_fmt(m.control, unit)} | {_fmt(m.candidate, unit)} | "
            f"{_fmt_delta(m.delta, unit)} | {ci} | {p} | {m.paired_users}/{m.unpaired_users} | "
            f"{m.symbol} {LABEL[m.verdict]}{why} |"
        )
    lines += ["", f"method: {cmp.method}; α = {cmp.alpha:g}"]
    if trend:
        lines += [
            "",
            "| look | answers control/candidate | 👎 control | 👎 candidate | Δ 👎 [CS] |",
            "|---|---|---|---|---|",
        ]
        for look in cmp.looks:
            cs = (
                f"{_fmt_delta(look.delta, '%')} [{_fmt_delta(look.low, '%')}, {_fmt_delta(look.high, '%')}]"
                if look.delta is not None
                else "–"
            )
            lines.append(
                f"| {look.at} | {look.answers['control']}/{look.answers['candidate']} | "
                f"{_fmt(look.thumbs_down_rate['control'], '%')} | "
                f"{_fmt(look.thumbs_down_rate['candidate'], '%')} | {cs} |"
            )
    return "\n".join(lines) + "\n"


def candidate_answers(
    log: AnswerLog, prompt_id: str, version: str, since: datetime, until: datetime | None = None
) -> int:
    """Answers the candidate ``version`` served for ``prompt_id`` from ``since`` to ``until``."""
    return sum(
        1
        for a in log.answers
        if (arm := a.arm_of(prompt_id)) is not None
        and arm.arm == "candidate"
        and arm.version == version
        and since <= a.when
        and (until is None or a.when <= until)
    )


def arms_seen(records: Sequence[AnswerRecord], prompt_id: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in records:
        arm = rec.arm_of(prompt_id)
        if arm is not None:
            out[arm.arm] = out.get(arm.arm, 0) + 1
    return out


def stage_evidence(
    releases: Releases,
    release: Release,
    log: AnswerLog | None,
    now: datetime,
    *,
    alpha: float = sequential.ALPHA,
    shadow: tuple[int | None, str | None] = (None, None),
) -> Evidence:
    """What the rollout of ``release`` has shown for its stage at ``now``: for an answers
    stage, the candidate's answers in ``log`` since the stage began and the metrics the A/B
    flags ❌; for a shadow stage, ``shadow`` (answers replayed by a `rag shadow` report of the
    candidate, or why the report given does not count)."""
    rollout = release.rollout
    assert rollout is not None
    plan = plan_of(releases)
    stage = plan[stage_index(plan, rollout)]
    if stage.evidence == "shadow":
        return Evidence(shadow_replayed=shadow[0], shadow_problem=shadow[1])
    if log is None:
        return Evidence()
    qualified = f"{release.prompt_id}_v{rollout.candidate}"
    since = parse_since(rollout.since)
    answers = candidate_answers(log, release.prompt_id, qualified, since, now)
    regressions: tuple[str, ...] = ()
    if answers:
        cmp = compare_arms(
            log, release.prompt_id, since=since, until=now, alpha=alpha, candidate=qualified
        )
        regressions = cmp.regressions
    return Evidence(answers=answers, regressions=regressions)
