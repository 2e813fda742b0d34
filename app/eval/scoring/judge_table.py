"""One table of judge metrics, filled by the :func:`judge_metric` decorator.

A judge metric is one prompt module (``judge/<name>_vN`` in the registry) plus one
decorated *variables builder*::

    @judge_metric(
        "faithfulness",
        prompt="judge/faithfulness",
        offline=faithfulness_rule,
        description="judge/faithfulness: every claim supported by the assembled context",
    )
    def faithfulness(j: JudgeInput) -> dict[str, str]:
        return {"context": j.context, "question": j.question, "candidate": j.candidate}

The decorator registers the metric's :class:`~app.eval.scoring.base.MetricSpec`
(``kind="judge"``) in the metrics table, the offline rule with
``offline:reference-judge`` (:data:`app.baselines.reference_judge.RULES`) and the
entry here. The runner, preflight, the report's judge prompt refs, calibration and the
thresholds all read :func:`app.eval.scoring.table.judge_table`; nothing else lists the judge metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.baselines.reference_judge import RULES, OfflineRule
from app.eval.datasets.case import Case
from app.eval.scoring.base import MetricContext, MetricSpec, Observation, Score
from app.eval.scoring.registry import REGISTRY, forget, metric


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
    """One row of the table."""

    name: str
    prompt: str  # registry prompt id, e.g. judge/faithfulness
    variables: VariablesFn
    offline: OfflineRule
    description: str

    @property
    def spec(self) -> MetricSpec:
        return REGISTRY[self.name][0]


_TABLE: dict[str, JudgeMetric] = {}


def judge_metric(
    name: str,
    *,
    prompt: str,
    offline: OfflineRule,
    description: str,
    unit: str = "score 1-5",
    group: str = "generation",
) -> Callable[[VariablesFn], VariablesFn]:
    """Register a judge metric whose prompt variables the decorated function builds."""

    def wrap(fn: VariablesFn) -> VariablesFn:
        if name in _TABLE:
            raise RuntimeError(f"judge metric {name!r} registered twice")

        def score(case: Case, obs: Observation, ctx: MetricContext) -> Score:
            found = ctx.judge_scores.get(name)
            return found if found is not None else Score.undefined("no judge configured")

        metric(
            name,
            direction="higher",
            kind="judge",
            unit=unit,
            scale="continuous",
            group=group,
            description=description,
        )(score)
        RULES[name] = offline
        _TABLE[name] = JudgeMetric(name, prompt, fn, offline, description)
        return fn

    return wrap


def unregister(name: str) -> None:
    """Remove a judge metric (tests that register a temporary one)."""
    _TABLE.pop(name, None)
    RULES.pop(name, None)
    forget(name)


def judge_entries() -> dict[str, JudgeMetric]:
    """The judge metrics registered so far, in registration order (read the judge table
    through :func:`app.eval.scoring.table.judge_table`: it has the built-in ones)."""
    return dict(_TABLE)
