"""The one table of metrics, and the two decorators that fill it.

A metric is one :class:`Metric` entry in :data:`REGISTRY`: its spec (name, direction, kind,
unit, scale, group, red-line flag, description), the function that scores a case, and — for
a judge metric — its :class:`JudgeMetric` part: the registry prompt it asks, the builder of
that prompt's variables and the rule ``offline:reference-judge`` applies instead of a model.

* :func:`metric` registers a deterministic metric (a function of case, observation, context);
* :func:`judge_metric` registers a judge metric: one prompt module (``judge/<name>_vN``) plus
  one decorated *variables builder*::

      def concise_rule(variables, metadata):          # what offline:reference-judge answers
          n = len(variables["candidate"])
          return {"score": 5 if n <= 80 else 2, "reasoning": f"{n} characters"}

      @judge_metric(
          "conciseness",
          prompt="judge/conciseness",
          offline=concise_rule,
          description="judge/conciseness: the answer says what it must, briefly",
      )
      def conciseness(j: JudgeInput) -> dict[str, str]:
          return {"question": j.question, "candidate": j.candidate}

This module is the writing side only and imports no metric: the metric modules import it.
The harness reads the table through :mod:`app.eval.scoring.table`, which imports the
built-in metrics first and gives the reference judge the offline rules of its judge entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from app.eval.scoring.base import (
    Direction,
    Kind,
    MetricContext,
    MetricFn,
    MetricSpec,
    Observation,
    Scale,
    Score,
)

if TYPE_CHECKING:
    from app.baselines.reference_judge import OfflineRule
    from app.eval.datasets.case import Case


@dataclass(frozen=True)
class JudgeInput:
    """What a judge may be shown about one answer (a case + observation, or a label row)."""

    question: str
    candidate: str
    context: str = ""  # the context the pipeline assembled for the model
    golden_answer: str = ""
    expected_refusal: bool = False

    @classmethod
    def of(cls, case: Case, obs: Observation) -> JudgeInput:
        return cls(
            question=case.question,
            candidate=obs.answer,
            context=obs.context,
            golden_answer=case.golden_answer,
            expected_refusal=case.expected_refusal,
        )

    def metadata(self) -> dict[str, str]:
        return {"expected_refusal": "true" if self.expected_refusal else "false"}


VariablesFn = Callable[[JudgeInput], Mapping[str, str]]


@dataclass(frozen=True)
class JudgeMetric:
    """The judge part of a metric's entry: everything the harness needs to ask its judge."""

    name: str
    prompt: str  # registry prompt id, e.g. judge/faithfulness
    variables: VariablesFn
    offline: OfflineRule  # what offline:reference-judge answers for this metric
    spec: MetricSpec

    @property
    def description(self) -> str:
        return self.spec.description


class Metric(NamedTuple):
    """One entry of the table."""

    spec: MetricSpec
    fn: MetricFn
    judge: JudgeMetric | None = None  # set for a judge metric


REGISTRY: dict[str, Metric] = {}
#: bumped by every change of :data:`REGISTRY` (:func:`metric`, :func:`forget`): the report
#: order and the ``--metrics`` selections (:mod:`app.eval.scoring.table`) are computed once
#: per version, not per case
_VERSION = [0]


def _register(entry: Metric) -> None:
    name = entry.spec.name
    if name in REGISTRY:
        raise RuntimeError(f"metric {name!r} registered twice")
    REGISTRY[name] = entry
    _VERSION[0] += 1


def metric(
    name: str,
    *,
    direction: Direction,
    kind: Kind,
    unit: str,
    scale: Scale,
    group: str,
    description: str,
    red_line: bool = False,
) -> Callable[[MetricFn], MetricFn]:
    """Register a metric function under ``name``."""

    def wrap(fn: MetricFn) -> MetricFn:
        spec = MetricSpec(name, direction, kind, unit, scale, red_line, group, description)
        _register(Metric(spec, fn))
        return fn

    return wrap


def judge_metric(
    name: str,
    *,
    prompt: str,
    offline: OfflineRule,
    description: str,
    direction: Direction = "higher",
    unit: str = "score 1-5",
    group: str = "generation",
) -> Callable[[VariablesFn], VariablesFn]:
    """Register a judge metric whose prompt variables the decorated function builds.

    Its score for a case is the judges' verdict (``MetricContext.judge_scores``), or a
    ``null`` "no judge configured" when the run has no judge."""

    def wrap(fn: VariablesFn) -> VariablesFn:
        spec = MetricSpec(name, direction, "judge", unit, "continuous", False, group, description)

        def score(case: Case, obs: Observation, ctx: MetricContext) -> Score:
            found = ctx.judge_scores.get(name)
            return found if found is not None else Score.undefined("no judge configured")

        _register(Metric(spec, score, JudgeMetric(name, prompt, fn, offline, spec)))
        return fn

    return wrap


def forget(name: str) -> None:
    """Remove a metric (tests that register a temporary one)."""
    REGISTRY.pop(name, None)
    _VERSION[0] += 1


def version() -> tuple[int, int]:
    """Changes whenever :data:`REGISTRY` does (its length too: a direct ``REGISTRY.pop`` is
    noticed): what is derived from the table is computed once per version."""
    return _VERSION[0], len(REGISTRY)
