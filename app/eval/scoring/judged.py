"""The built-in judge metrics: one :func:`~app.eval.scoring.registry.judge_metric` entry each.

Each entry names its registry prompt, builds that prompt's variables from a
:class:`~app.eval.scoring.registry.JudgeInput` and carries the rule ``offline:reference-judge``
answers with instead of a model (defined here, next to its judge; the overlap measures are
those of :mod:`app.baselines.reference_judge`). A new judge metric is a prompt module under
``app/generation/prompts/judge/`` plus one entry here (docs/extending/add-a-judge-metric.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.baselines import reference_judge

# registration order = report order: the deterministic generation metrics come first
from app.eval.scoring import generation as _generation  # noqa: F401
from app.eval.scoring.registry import JudgeInput, judge_metric


def _faithfulness_rule(v: Mapping[str, str], meta: Mapping[str, str]) -> dict[str, object]:
    return reference_judge.faithfulness(v.get("candidate", ""), v.get("context", ""))


def _correctness_rule(v: Mapping[str, str], meta: Mapping[str, str]) -> dict[str, object]:
    expected = meta.get("expected_refusal", "").lower() == "true"
    return reference_judge.correctness(v.get("candidate", ""), v.get("golden_answer", ""), expected)


def _relevance_rule(v: Mapping[str, str], meta: Mapping[str, str]) -> dict[str, object]:
    return reference_judge.relevance(v.get("candidate", ""), v.get("question", ""))


@judge_metric(
    "faithfulness",
    prompt="judge/faithfulness",
    offline=_faithfulness_rule,
    description="judge/faithfulness: every claim supported by the assembled context",
)
def faithfulness(j: JudgeInput) -> dict[str, str]:
    return {"context": j.context, "question": j.question, "candidate": j.candidate}


@judge_metric(
    "relevance",
    prompt="judge/relevance",
    offline=_relevance_rule,
    description="judge/relevance: the answer addresses the question",
)
def relevance(j: JudgeInput) -> dict[str, str]:
    return {"question": j.question, "candidate": j.candidate}


@judge_metric(
    "correctness",
    prompt="judge/correctness",
    offline=_correctness_rule,
    description="judge/correctness: agreement with golden_answer",
)
def correctness(j: JudgeInput) -> dict[str, str]:
    return {"question": j.question, "golden_answer": j.golden_answer, "candidate": j.candidate}
