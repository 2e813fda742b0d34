"""The records a comparison returns: one :class:`MetricDelta` row per metric, the
:class:`TagRegression` list under the table, and the :class:`Comparison` itself."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from app.eval.compare.answers import AnswerDelta
from app.eval.stats import significance

Verdict = Literal["better", "within_noise", "review", "regression", "red_line", "no_data"]

SYMBOL: dict[str, str] = {
    "better": "✅",
    "within_noise": "✅",
    "review": "⚠️",
    "regression": "❌",
    "red_line": "❌",
    "no_data": "➖",
}
LABEL: dict[str, str] = {
    "better": "better",
    "within_noise": "within noise",
    "review": "needs review",
    "regression": "significant regression",
    "red_line": "red line",
    "no_data": "no paired values",
}


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
    ci95: tuple[float, float] | None
    variance_p: float | None
    discordant: tuple[int, int] | None  # McNemar (0→1, 1→0)
    verdict: Verdict
    reasons: tuple[str, ...]

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
    significant: bool


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
    alpha: float = significance.ALPHA
    methods: str = significance.METHODS

    @property
    def has_regression(self) -> bool:
        return any(r.verdict in ("regression", "red_line") for r in self.rows)

    @property
    def needs_review(self) -> bool:
        return any(r.verdict == "review" for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, raw in zip(self.rows, data["rows"], strict=True):
            raw["symbol"] = row.symbol
        data["has_regression"] = self.has_regression
        data["needs_review"] = self.needs_review
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)
