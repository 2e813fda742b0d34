"""The nouns every metric shares: a spec, a score, and what a metric looks at.

A metric is a stateless function ``(case, observation, context) -> Score``. It never keeps
state between calls, so results do not depend on case order or concurrency.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.eval.datasets import Case

Direction = Literal["higher", "lower"]
Kind = Literal["deterministic", "judge"]
Scale = Literal["binary", "continuous"]


class Score(BaseModel):
    """One metric's value for one case. ``value`` is ``None`` only together with ``reason``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None
    reason: str | None = None
    samples: list[float | None] | None = None  # judge metrics: one entry per sample
    spread: float | None = None  # judge metrics: max - min over the parsed samples
    n_errors: int = 0  # judge metrics: samples that did not parse after one repair
    detail: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def undefined(cls, reason: str, **kw: Any) -> Score:
        return cls(value=None, reason=reason, **kw)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    direction: Direction
    kind: Kind
    unit: str
    scale: Scale
    red_line: bool
    group: str  # retrieval | generation | safety | rewrite | cost
    description: str

    def as_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "kind": self.kind,
            "unit": self.unit,
            "scale": self.scale,
            "red_line": self.red_line,
            "group": self.group,
            "description": self.description,
        }


@dataclass(frozen=True)
class Observation:
    """What the pipeline did for one case, in the harness's own terms.

    ``retrieved`` is the merged ranked list of chunk ids the retriever returned (rank 1
    first), ``assembled`` the chunks placed into the prompt (in ``[n]`` order), ``cited`` the
    ``[n]`` numbers found in the answer. ``rewrite`` is the standalone question the rewrite
    step produced (``None`` when the step did not run).
    """

    answer: str
    refused: bool
    retrieved: tuple[str, ...] = ()
    assembled: tuple[str, ...] = ()
    cited: tuple[int, ...] = ()
    rewrite: str | None = None
    mode: str | None = None
    latency_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    trace: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricContext:
    """Run-wide facts a metric may read (never written to)."""

    k: int = 5
    chunk_acl: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    canary: str | None = None
    judge_scores: Mapping[str, Score] = field(default_factory=dict)


MetricFn = Callable[[Case, Observation, MetricContext], Score]


def normalise(text: str) -> str:
    """NFKC (full-width → half-width), casefold, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def _found(needle: str, haystack: str) -> bool:
    """Substring search, except that a needle starting or ending in a digit must match a
    whole number there: ``32000`` is not found in ``132000`` nor ``600`` in ``600.5``."""
    if not needle:
        return True
    pattern = re.escape(needle)
    if needle[0].isdigit():
        pattern = r"(?<![\d.])" + pattern
    if needle[-1].isdigit():
        pattern += r"(?!\.?\d)"
    return re.search(pattern, haystack) is not None


def contains(haystack: str, needle: str) -> bool:
    """Normalised containment; also ignores whitespace differences inside CJK text and
    thousands separators in numbers (``32,000`` and ``32000`` are the same number), and
    numbers match whole (see :func:`_found`)."""
    h = _THOUSANDS.sub("", normalise(haystack))
    n = _THOUSANDS.sub("", normalise(needle))
    return _found(n, h) or _found(n.replace(" ", ""), h.replace(" ", ""))
