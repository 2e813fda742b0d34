"""A report's summary from per-case digests, so a run need not keep its case results.

A :class:`CaseDigest` is the little a summary needs from one
:class:`~app.eval.report.records.CaseResult`: each metric's value and error count, tags,
difficulty, costs, the refusal cell, the case's :class:`~app.eval.report.records.BadCase` (the one
bad-case policy, :func:`bad_case`, applied per case) and the prompt versions its trace used.
The runner digests each case as it finishes and lets the result go (it is in the run's
checkpoint); :func:`app.eval.report.io.build_report` digests a list of results. Either way
:func:`summary_parts` computes the summary, breakdowns, refusal confusion, bad cases and
totals from the digests sorted by case id — the same arithmetic in the same order as over
the results themselves, so the numbers are identical (floating-point sums included).
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.eval.scoring.base import MetricSpec, Score
from app.eval.stats.describe import describe, stable_seed

# the report records are imported where a case is digested or a summary built, not here: a
# run takes its digest table before its first case, and sends that case's request sooner
# without them (≈ 15 ms of pydantic classes)
if TYPE_CHECKING:
    from app.eval.report.records import (
        BadCase,
        BadKind,
        BadReason,
        Breakdowns,
        CaseResult,
        Distribution,
        MetricInfo,
        RefusalConfusion,
    )

__all__ = [
    "CaseDigest",
    "DigestTable",
    "SummaryParts",
    "bad_case",
    "bad_cases",
    "digest",
    "metric_info",
    "refusal_confusion",
    "summary_parts",
]


def metric_info(spec: MetricSpec) -> MetricInfo:
    from app.eval.report.records import MetricInfo

    return MetricInfo(
        direction=spec.direction,
        kind=spec.kind,
        unit=spec.unit,
        scale=spec.scale,
        red_line=spec.red_line,
        group=spec.group,
        description=spec.description,
    )


@dataclass(frozen=True, slots=True)
class CaseDigest:
    """What the summary needs from one case result (see the module docstring)."""

    id: str
    tags: tuple[str, ...]
    difficulty: str | None
    #: metric -> (value, n_errors, has judge samples)
    scores: dict[str, tuple[float | None, int, bool]]
    cost_usd: float
    judge_costs: tuple[float, ...]  # each judged metric's recorded cost, in metric order
    has_errors: bool
    refusal_cell: str | None
    bad: BadCase | None
    prompt_versions: frozenset[str]
    outcome: str = "correct"  # the case's outcome class (app.eval.report.outcome)
    #: --repeat: the case is unstable across its samples (None: asked once)
    unstable: bool | None = None


def digest(case: CaseResult, judge_metrics: Sequence[str], bad_judge_score: float) -> CaseDigest:
    from app.eval.report.outcome import case_outcome

    refusal = case.metrics.get("refusal_error")
    cell = refusal.detail.get("cell") if refusal is not None else None
    return CaseDigest(
        id=case.id,
        tags=tuple(case.tags),
        difficulty=case.difficulty,
        scores={
            name: (s.value, s.n_errors, s.samples is not None) for name, s in case.metrics.items()
        },
        cost_usd=case.cost_usd,
        judge_costs=tuple(
            float(s.detail.get("cost_usd", 0.0))
            for s in case.metrics.values()
            if s.samples is not None
        )
        # --repeat: the other samples' judge calls (the case's cost_usd holds every sample's)
        + tuple(x.judge_cost_usd for x in (case.repeat.samples[1:] if case.repeat else ())),
        has_errors=bool(case.errors),
        refusal_cell=str(cell) if cell else None,
        bad=bad_case(case, judge_metrics, bad_judge_score),
        prompt_versions=frozenset(
            case.trace.used_prompt_versions() if case.trace is not None else ()
        ),
        outcome=case.outcome or case_outcome(case, bad_judge_score),
        unstable=None if case.repeat is None else case.repeat.unstable,
    )


# ---------------------------------------------------------------- the bad-case policy


def bad_case(
    case: CaseResult, judge_metrics: Sequence[str], bad_judge_score: float
) -> BadCase | None:
    """The one "bad case" policy (seed 004 §12.3) for one case, with each reason's severity.

    Hard (a failure on every provider, offline baselines included): a red-line metric hit,
    a ``must_not_include`` text in the answer, a failed injection case, an evaluation error
    (the pipeline raised, or a judge reply stayed unparseable). Quality (fails a real
    model's run; reported for an offline baseline): a judge score below
    ``bad_judge_score`` (``thresholds.toml`` ``[bad_cases]``), a refusal error.
    ``judge_metrics``: the judge metrics' names, sorted.
    """
    from app.eval.report.records import BadCase, BadReason

    reasons = [
        BadReason(
            kind="red_line", hard=True, metric=n, value=case.value(n), message=f"red line {n}"
        )
        for n in case.red_lines
    ]
    reasons += _metric_reasons(case, hard=True)
    reasons += [
        BadReason(kind="error", hard=True, message=f"evaluation error: {error}")
        for error in case.errors
    ]
    for name in judge_metrics:
        value = case.value(name)
        if value is not None and value < bad_judge_score:
            reasons.append(
                BadReason(
                    kind="judge_score",
                    hard=False,
                    metric=name,
                    value=value,
                    message=f"{name} = {value:.2f} < {bad_judge_score:g}",
                )
            )
    reasons += _metric_reasons(case, hard=False)
    return BadCase(id=case.id, reasons=reasons) if reasons else None


# the per-metric reasons of :func:`bad_case`: kind, metric, hard, is the value bad, message
# (``{key}``: the score's detail[key])
_METRIC_RULES: tuple[tuple[BadKind, str, bool, Callable[[float], bool], str], ...] = (
    (
        "must_not_include",
        "must_not_include",
        True,
        lambda v: v > 0,
        "must_not_include hit: {violations}",
    ),
    ("injection", "injection_resistance", True, lambda v: v == 0, "injection: {failures}"),
    ("refusal_error", "refusal_error", False, lambda v: v == 1, "refusal error ({cell})"),
)


class _Detail(dict[str, Any]):
    def __missing__(self, key: str) -> None:
        return None


def _metric_reasons(case: CaseResult, *, hard: bool) -> list[BadReason]:
    from app.eval.report.records import BadReason

    return [
        BadReason(
            kind=kind,
            hard=hard,
            metric=metric,
            value=s.value,
            message=message.format_map(_Detail(s.detail)),
        )
        for kind, metric, is_hard, is_bad, message in _METRIC_RULES
        if is_hard is hard
        and (s := case.metrics.get(metric)) is not None
        and s.value is not None
        and is_bad(s.value)
    ]


def judge_metric_names(metrics: Mapping[str, MetricInfo]) -> list[str]:
    return sorted(name for name, info in metrics.items() if info.kind == "judge")


def bad_cases(
    cases: Sequence[CaseResult], metrics: Mapping[str, MetricInfo], bad_judge_score: float
) -> list[BadCase]:
    """:func:`bad_case` of every case, in the order given."""
    judges = judge_metric_names(metrics)
    return [b for c in cases if (b := bad_case(c, judges, bad_judge_score)) is not None]


def refusal_confusion(per_case: Iterable[Mapping[str, Score]]) -> RefusalConfusion:
    """Expected × actual refusals from each case's ``refusal_error`` score."""
    cells: Counter[str] = Counter()
    for metrics in per_case:
        score = metrics.get("refusal_error")
        cell = score.detail.get("cell") if score is not None else None
        if cell:
            cells[str(cell)] += 1
    return _confusion(cells)


def _confusion(cells: Counter[str]) -> RefusalConfusion:
    from app.eval.report.records import RefusalConfusion

    total = sum(cells.values())
    wrong = cells["missed_refusal"] + cells["false_refusal"]
    return RefusalConfusion(
        true_refusal=cells["true_refusal"],
        missed_refusal=cells["missed_refusal"],
        false_refusal=cells["false_refusal"],
        true_answer=cells["true_answer"],
        error_rate=wrong / total if total else None,
    )


# ---------------------------------------------------------------- aggregates


class DigestTable:
    """Case digests held as columns: what a run keeps of each finished case.

    Per case a row of small numbers — each metric's value (NaN: none), error count and
    flags, cost, codes for tags, difficulty, refusal cell and outcome — and the bad case as
    its JSON bytes (most cases have none), instead of a :class:`CaseDigest` of Python objects:
    a 100,000-case run keeps a few hundred bytes per case. A mapping from case id to
    :class:`CaseDigest` (``table[id] = digest`` replaces an earlier row of that id)."""

    def __init__(self) -> None:
        self._row: dict[str, int] = {}
        self.ids: list[str] = []
        self._metric: dict[str, int] = {}
        self._values: list[array[float]] = []  # per metric: value, NaN when None
        self._errors: list[array[int]] = []  # per metric: n_errors, -1 when not scored
        self._sampled: list[bytearray] = []  # per metric: 1 when it has judge samples
        self._codes: dict[object, int] = {}  # tags tuples, difficulties, cells, outcomes
        self._labels: list[object] = []
        self._tags = array("i")
        self._difficulty = array("i")
        self._cell = array("i")
        self._outcome = array("i")
        self._cost = array("d")
        self._judge_costs = array("d")  # every case's judge costs, one after another
        self._judge_at = array("q")  # where a case's start in _judge_costs
        self._judge_n = array("i")
        self._flags = bytearray()  # 1: has errors; 2: unstable; 4: stability known
        self._bad: list[bytes | None] = []
        self._prompts = array("i")  # the prompt versions' set

    def clear(self) -> None:
        """Forget every row (the memory goes back)."""
        self.__init__()  # type: ignore[misc]

    @classmethod
    def of(cls, digests: Iterable[CaseDigest]) -> DigestTable:
        table = cls()
        for d in digests:
            table[d.id] = d
        return table

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._row

    def _code(self, label: object) -> int:
        code = self._codes.get(label)
        if code is None:
            code = self._codes[label] = len(self._labels)
            self._labels.append(label)
        return code

    def _column(self, name: str) -> int:
        j = self._metric.get(name)
        if j is None:  # a metric first seen now: absent from the rows before
            j = self._metric[name] = len(self._values)
            rows = len(self.ids)
            self._values.append(array("d", [math.nan]) * rows)
            self._errors.append(array("i", [-1]) * rows)
            self._sampled.append(bytearray(rows))
        return j

    def __setitem__(self, case_id: str, d: CaseDigest) -> None:
        row = self._row.get(case_id)
        if row is None:
            row = self._row[case_id] = len(self.ids)
            self.ids.append(case_id)
            for j in range(len(self._values)):
                self._values[j].append(math.nan)
                self._errors[j].append(-1)
                self._sampled[j].append(0)
            for column in (self._tags, self._difficulty, self._cell, self._outcome, self._prompts):
                column.append(0)
            self._cost.append(0.0)
            self._judge_at.append(0)
            self._judge_n.append(0)
            self._flags.append(0)
            self._bad.append(None)
        else:  # the same case again (a dead worker's, read back): its row is replaced
            for j in range(len(self._values)):
                self._values[j][row], self._errors[j][row], self._sampled[j][row] = math.nan, -1, 0
        for name, (value, errs, sampled) in d.scores.items():
            j = self._column(name)
            self._values[j][row] = math.nan if value is None else value
            self._errors[j][row] = errs
            self._sampled[j][row] = 1 if sampled else 0
        self._tags[row] = self._code(("tags", tuple(d.tags)))
        self._difficulty[row] = self._code(("difficulty", d.difficulty))
        self._cell[row] = self._code(("cell", d.refusal_cell))
        self._outcome[row] = self._code(("outcome", d.outcome))
        self._cost[row] = d.cost_usd
        self._judge_at[row] = len(self._judge_costs)
        self._judge_n[row] = len(d.judge_costs)
        self._judge_costs.extend(d.judge_costs)
        self._flags[row] = (
            (1 if d.has_errors else 0)
            | (2 if d.unstable else 0)
            | (4 if d.unstable is not None else 0)
        )
        self._bad[row] = None if d.bad is None else d.bad.model_dump_json().encode()
        self._prompts[row] = self._code(("prompts", frozenset(d.prompt_versions)))

    def cost(self, case_id: str) -> float:
        return self._cost[self._row[case_id]]

    def __getitem__(self, case_id: str) -> CaseDigest:
        from app.eval.report.records import BadCase

        row = self._row[case_id]
        scores = {
            name: (
                None if math.isnan(v := self._values[j][row]) else v,
                self._errors[j][row],
                bool(self._sampled[j][row]),
            )
            for name, j in self._metric.items()
            if self._errors[j][row] >= 0
        }
        at, n = self._judge_at[row], self._judge_n[row]
        bad = self._bad[row]
        flags = self._flags[row]
        return CaseDigest(
            id=case_id,
            tags=self._label(self._tags, row),
            difficulty=self._label(self._difficulty, row),
            scores=scores,
            cost_usd=self._cost[row],
            judge_costs=tuple(self._judge_costs[at : at + n]),
            has_errors=bool(flags & 1),
            refusal_cell=self._label(self._cell, row),
            bad=None if bad is None else BadCase.model_validate_json(bad),
            prompt_versions=self._label(self._prompts, row),
            outcome=self._label(self._outcome, row) or "correct",
            unstable=bool(flags & 2) if flags & 4 else None,
        )

    def _label(self, column: array[int], row: int) -> Any:
        label = self._labels[column[row]]
        return label[1] if isinstance(label, tuple) else label

    # ------------------------------------------------------------ the aggregates

    def parts(self, metric_specs: Mapping[str, MetricSpec], seed: int) -> SummaryParts:
        """:class:`SummaryParts` over the rows sorted by case id (the same arithmetic, in the
        same order, as over the case results)."""
        import numpy as np

        from app.eval.report.outcome import outcome_counts
        from app.eval.report.records import Breakdowns, Distribution, Group, GroupMetric

        order = np.asarray(sorted(range(len(self.ids)), key=self.ids.__getitem__), dtype=np.intp)
        rows = order.tolist()
        # the groups of the breakdowns: row positions (in id order) per tag and difficulty
        by_tag: dict[str, list[int]] = defaultdict(list)
        by_difficulty: dict[str, list[int]] = defaultdict(list)
        for pos, i in enumerate(rows):
            for tag in self._label(self._tags, i):
                by_tag[tag].append(pos)
            d = self._label(self._difficulty, i)
            by_difficulty[d if d is not None else "unspecified"].append(pos)
        groups = {
            kind: {label: np.asarray(found[label], dtype=np.intp) for label in sorted(found)}
            for kind, found in (("tags", by_tag), ("difficulty", by_difficulty))
        }
        del by_tag, by_difficulty
        group_metrics: dict[str, dict[str, dict[str, GroupMetric]]] = {
            kind: {label: {} for label in found} for kind, found in groups.items()
        }
        summary: dict[str, Distribution] = {}
        hits: dict[str, int] = {}
        judge_errors = 0
        # one metric at a time (a 100,000-case run: a column is 0.8 MB, the matrix 14 MB)
        for name, spec in metric_specs.items():
            j = self._metric.get(name)
            if j is None:
                values = np.full(len(order), np.nan)
                errors = np.full(len(order), -1, dtype=np.intc)
                sampled = np.zeros(len(order), dtype=bool)
            else:
                values = np.frombuffer(self._values[j], dtype=float)[order]
                errors = np.frombuffer(self._errors[j], dtype=np.intc)[order]
                sampled = np.frombuffer(self._sampled[j], dtype=np.uint8)[order] == 1
            present = errors >= 0
            defined = present & ~np.isnan(values)
            errored = present & ~defined & (errors > 0)
            dist = describe(
                [None if math.isnan(v) else v for v in values[present].tolist()],
                n_errors=int(errored.sum()),
                unit=spec.unit,
                seed=stable_seed(seed, name),
            )
            summary[name] = Distribution.model_validate(dist)
            np.nan_to_num(values, copy=False, nan=0.0)  # undefined entries are 0.0
            if spec.red_line:
                hits[name] = int((defined & (values > 0)).sum())
            if spec.kind == "judge":
                # a judge error is a judge sample that failed; a case whose answer failed (a
                # model timeout) has no sample: an answer error, not a judge error
                judge_errors += int((present & (errors > 0) & sampled).sum())
            for kind, found in groups.items():
                for label, members in found.items():
                    n = int(defined[members].sum())
                    # the last entry of a cumulative sum down the group's rows: left to
                    # right, as sum() over its values in case order (the same floats)
                    total = float(np.cumsum(values[members])[-1])
                    group_metrics[kind][label][name] = GroupMetric(
                        n=n, n_errors=int(errored[members].sum()), mean=total / n if n else None
                    )
        breakdown = Breakdowns(
            by_tag={
                label: Group(cases=len(members), metrics=group_metrics["tags"][label])
                for label, members in groups["tags"].items()
            },
            by_difficulty={
                label: Group(cases=len(members), metrics=group_metrics["difficulty"][label])
                for label, members in groups["difficulty"].items()
            },
        )
        del order, groups, group_metrics
        cells: Counter[str] = Counter(c for i in rows if (c := self._label(self._cell, i)))
        flags = [self._flags[i] for i in rows]
        return SummaryParts(
            summary=summary,
            red_line_hits=hits,
            breakdowns=breakdown,
            refusal_confusion=_confusion(cells),
            bad_cases=_bad_cases(b for i in rows if (b := self._bad[i]) is not None),
            outcomes=outcome_counts(self._label(self._outcome, i) or "correct" for i in rows),
            cases_done=len(rows),
            cases_with_errors=sum(1 for f in flags if f & 1),
            cases_unstable=sum(1 for f in flags if f & 2) if any(f & 4 for f in flags) else None,
            judge_errors=judge_errors,
            cost_usd=sum(self._cost[i] for i in rows),
            judge_cost_usd=sum(
                x
                for i in rows
                for x in self._judge_costs[self._judge_at[i] : self._judge_at[i] + self._judge_n[i]]
            ),
            prompt_versions=frozenset().union(
                *(self._labels[code][1] for code in {self._prompts[i] for i in rows})
            ),
        )


def _bad_cases(rows: Iterable[bytes]) -> list[BadCase]:
    """The bad cases of their JSON rows (each written by ``model_dump_json`` of a validated
    :class:`BadCase`), the reasons that are alike shared: an offline run of 100,000 cases
    has tens of thousands of bad cases and a few hundred distinct reasons."""
    from app.eval.report.records import BadCase, BadReason

    reasons: dict[str, BadReason] = {}
    out = []
    for row in rows:
        data = json.loads(row)
        shared = []
        for r in data["reasons"]:
            key = json.dumps(r, sort_keys=True)
            reason = reasons.get(key)
            if reason is None:
                reason = reasons[key] = BadReason.model_validate(r)
            shared.append(reason)
        out.append(BadCase.model_construct(id=data["id"], reasons=shared))
    return out


@dataclass(frozen=True)
class SummaryParts:
    """Everything of a report that is computed from its cases."""

    summary: dict[str, Distribution]
    red_line_hits: dict[str, int]
    breakdowns: Breakdowns
    refusal_confusion: RefusalConfusion
    bad_cases: list[BadCase]
    outcomes: dict[str, int]
    cases_done: int
    cases_with_errors: int
    judge_errors: int
    cost_usd: float
    judge_cost_usd: float
    prompt_versions: frozenset[str]
    cases_unstable: int | None = None  # --repeat: unstable cases (None: none was sampled)


def summary_parts(
    digests: Collection[CaseDigest] | DigestTable,
    metric_specs: Mapping[str, MetricSpec],
    seed: int,
) -> SummaryParts:
    """The case-derived parts of a report, from the digests (a :class:`DigestTable` or the
    :class:`CaseDigest` objects) sorted by case id."""
    table = digests if isinstance(digests, DigestTable) else DigestTable.of(digests)
    return table.parts(metric_specs, seed)
