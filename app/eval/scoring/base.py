"""The nouns every metric shares: a spec, a score, and what a metric looks at.

A metric is a stateless function ``(case, observation, context) -> Score``. It never keeps
state between calls, so results do not depend on case order or concurrency.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.eval.datasets.case import Case
from app.generation.pipeline.trace import Trace
from app.text.match import contains
from app.text.normalise import normalise

Direction = Literal["higher", "lower"]
Kind = Literal["deterministic", "judge"]
Scale = Literal["binary", "continuous"]


class Score(BaseModel):
    """One metric's value for one case. ``value`` is ``None`` only together with ``reason``."""

    # a NaN (refused by the report writers) serialises as the constant NaN, never as null
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")

    value: float | None
    reason: str | None = None
    samples: list[float | None] | None = None  # judge metrics: one entry per sample
    spread: float | None = None  # judge metrics: max - min over the parsed samples
    n_errors: int = 0  # judge metrics: samples that did not parse after one repair
    detail: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def undefined(cls, reason: str, **kw: Any) -> Score:
        if kw:
            return cls(value=None, reason=reason, **kw)
        # a plain undefined score is one frozen value per reason (most reasons are the
        # metrics' constant texts; nothing writes to a score's detail), made once
        known = _UNDEFINED.get(reason)
        if known is None:
            if len(_UNDEFINED) >= 512:
                _UNDEFINED.clear()
            known = _UNDEFINED[reason] = cls(value=None, reason=reason)
        return known

    @classmethod
    def shared(cls, value: float, key: str, item: str | int) -> Score:
        """``Score(value=value, detail={key: item})`` as one frozen value per distinct
        ``(value, key, item)`` (a metric with few possible outcomes: a retrieval rate and
        the count retrieved, a refusal cell), made once; like :meth:`undefined`, it relies
        on nothing writing to a score's detail."""
        found = _SHARED.get((value, key, item))
        if found is None:
            if len(_SHARED) >= 512:
                _SHARED.clear()
            found = _SHARED[(value, key, item)] = cls(value=value, detail={key: item})
        return found


_UNDEFINED: dict[str, Score] = {}
_SHARED: dict[tuple[float, str, str | int], Score] = {}


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
    step produced (``None`` when the step did not run). ``context`` is the context text the
    pipeline placed into the prompt (what the model saw; the faithfulness judge reads it).
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
    context: str = ""
    trace: Trace | None = None  # the pipeline's own record of the answer


@dataclass(frozen=True)
class MetricContext:
    """Run-wide facts a metric may read (never written to)."""

    k: int = 5
    chunk_acl: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    canary: str | None = None
    judge_scores: Mapping[str, Score] = field(default_factory=dict)


MetricFn = Callable[[Case, Observation, MetricContext], Score]


__all__ = [
    "Direction",
    "Kind",
    "MetricContext",
    "MetricFn",
    "MetricSpec",
    "Observation",
    "Scale",
    "Score",
    "contains",
    "normalise",
]
