"""The records a comparison returns: one :class:`MetricDelta` row per metric, the
:class:`TagRegression` list under the table, and the :class:`Comparison` itself."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from app.eval.compare.answers import AnswerDelta
from app.eval.stats import significance

Verdict = Literal[
    "better",
    "no_change",
    "inconclusive",
    "judge_drift",
    "weak_judge",
    "review",
    "regression",
    "red_line",
    "not_measured",
    "no_data",
]

SYMBOL: dict[str, str] = {
    "better": "✅",
    "no_change": "✅",
    "inconclusive": "⚠️",
    "judge_drift": "⚠️",
    "weak_judge": "⚠️",
    "review": "⚠️",
    "regression": "❌",
    "red_line": "❌",
    "not_measured": "➖",
    "no_data": "➖",
}
LABEL: dict[str, str] = {
    "better": "better",
    "no_change": "no meaningful change",
    "inconclusive": "inconclusive",
    "judge_drift": "judge drift",
    "weak_judge": "weak judge",
    "review": "needs review",
    "regression": "significant regression",
    "red_line": "red line",
    "not_measured": "not measured",
    "no_data": "no paired values",
}
#: the headline of a comparison no model measured (PR comment, ``rag prompts review``)
UNVERIFIED = "unverified: no model ran"


@dataclass(frozen=True)
class MetricDelta:
    """One row of the delta table."""

    metric: str
    direction: str  # "higher" | "lower" | "none"
    scale: str  # "continuous" | "binary"
    unit: str
    red_line: bool
    n: int  # paired cases with a value in both reports
    base_mean: float | None
    new_mean: float | None
    delta: float | None
    base_std: float | None
    new_std: float | None
    test: str  # "wilcoxon" | "mcnemar" | "none"
    p_value: float | None
    ci95: tuple[float, float] | None  # paired bootstrap 95 % CI of Δ (rates too)
    variance_p: float | None
    discordant: tuple[int, int] | None  # McNemar (0→1, 1→0)
    verdict: Verdict
    reasons: tuple[str, ...]
    margin: float | None = None  # thresholds.toml [margins]: the practically relevant Δ
    p_adjusted: float | None = None  # Holm across the table's metric rows
    detectable: float | None = None  # smallest Δ this suite detects (α, 80 % power)
    cases_needed: int | None = None  # cases at which the margin becomes detectable
    judge_only: int | None = None  # judge metric: moved cases whose answer is identical
    moved: int | None = None  # cases whose value moved

    @property
    def symbol(self) -> str:
        return SYMBOL[self.verdict]


@dataclass(frozen=True)
class TagRegression:
    """A metric that got worse on the cases of one tag."""

    tag: str
    metric: str
    n: int
    base_mean: float
    new_mean: float
    delta: float
    p_value: float | None
    significant: bool  # Benjamini–Hochberg q < α across the whole breakdown
    q_value: float | None = None  # the Benjamini–Hochberg adjusted p-value
    worse: bool = True  # the metric got worse on the tag's cases


@dataclass(frozen=True)
class Comparison:
    base_label: str
    new_label: str
    title: str
    offline: bool
    ruler_changed: bool
    ruler_differences: tuple[str, ...]
    paired: int
    unpaired_base: tuple[str, ...]
    unpaired_new: tuple[str, ...]
    rows: tuple[MetricDelta, ...]
    tag_regressions: tuple[TagRegression, ...]
    notes: tuple[str, ...] = field(default=())
    #: ground-truth differences compared anyway (--allow-truth-change), and those a merged
    #: report's shards were merged with
    truth_differences: tuple[str, ...] = field(default=())
    answers: AnswerDelta | None = None  # answers changed k of N, offline-wording note
    #: paired cases that fail in new with another outcome than in base, per new outcome class
    #: ((class, case ids), …) in the order of the classes; None: a report has no outcomes
    new_failures: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    alpha: float = significance.ALPHA
    methods: str = significance.METHODS
    #: why no model measured the prompt-sensitive rows (offline candidate/judge), else None
    unverified: str | None = None
    #: the command that would measure them
    measure_with: str | None = None
    judge_only: tuple[str, ...] = ()  # cases with an identical answer whose judge score moved
    tag_tests: int = 0  # tag × metric pairs in the Benjamini–Hochberg family
    #: --repeat: the paired cases left out of the verdicts, unstable in either report (their
    #: outcome flipped or a score spread beyond its margin across the samples)
    unstable: tuple[str, ...] = ()
    #: --repeat K of each report (1: asked once)
    samples: tuple[int, int] = (1, 1)
    #: what --repeat did or could not do (an offline candidate is asked once), one line each
    repeat_notes: tuple[str, ...] = ()
    #: a report's model candidate was asked more than once per case (--repeat K > 1)
    sampled: bool = False

    @property
    def has_regression(self) -> bool:
        return any(r.verdict in ("regression", "red_line") for r in self.rows)

    @property
    def needs_review(self) -> bool:
        return any(
            r.verdict in ("review", "inconclusive", "judge_drift", "weak_judge") for r in self.rows
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, raw in zip(self.rows, data["rows"], strict=True):
            raw["symbol"] = row.symbol
        data["has_regression"] = self.has_regression
        data["needs_review"] = self.needs_review
        data["headline"] = UNVERIFIED if self.unverified else None
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)
