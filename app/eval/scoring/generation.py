"""Generation metrics: keyword completeness and violations, rewrite, cost.

The judge metrics (faithfulness, relevance, correctness) are rows of the judge table:
:mod:`app.eval.scoring.judged`.
"""

from __future__ import annotations

import re

from app.eval.datasets.case import Case
from app.eval.scoring.base import MetricContext, Observation, Score
from app.eval.scoring.registry import metric
from app.text import contains, normalise

REWRITE_EQUIVALENCE = "_rewrite_equivalence"  # judge_scores key for the rewrite judge
_TRAILING_PUNCT = re.compile(r"[\s。．.？?！!]+$")


@metric(
    "completeness",
    direction="higher",
    kind="deterministic",
    unit="ratio 0-1",
    scale="continuous",
    group="generation",
    description="share of must_include keywords present (NFKC + casefold normalised)",
)
def completeness(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    if not case.must_include:
        return Score.undefined("no must_include keywords")
    missing = [kw for kw in case.must_include if not contains(obs.answer, kw)]
    hit = len(case.must_include) - len(missing)
    return Score(value=hit / len(case.must_include), detail={"missing": missing})


@metric(
    "must_not_include",
    direction="lower",
    kind="deterministic",
    unit="rate",
    scale="binary",
    group="generation",
    description="1 when the answer contains any must_not_include word",
)
def must_not_include(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    if not case.must_not_include:
        return Score.undefined("no must_not_include words")
    found = [kw for kw in case.must_not_include if contains(obs.answer, kw)]
    return Score(value=1.0 if found else 0.0, detail={"violations": found})


def rewrite_matches(rewrite: str, golden: str) -> bool:
    """Normalised equality, ignoring trailing punctuation and inner whitespace."""

    def norm(text: str) -> str:
        return _TRAILING_PUNCT.sub("", normalise(text)).replace(" ", "")

    return norm(rewrite) == norm(golden)


@metric(
    "rewrite_accuracy",
    direction="higher",
    kind="deterministic",
    unit="rate",
    scale="binary",
    group="rewrite",
    description="standalone rewrite equals golden_rewrite (normalised, or judge-equivalent)",
)
def rewrite_accuracy(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    if case.golden_rewrite is None:
        return Score.undefined("no golden_rewrite")
    produced = obs.rewrite if obs.rewrite is not None else case.question
    detail = {"rewrite": produced, "rewrite_ran": obs.rewrite is not None}
    if rewrite_matches(produced, case.golden_rewrite):
        return Score(value=1.0, detail={**detail, "by": "normalised match"})
    judged = ctx.judge_scores.get(REWRITE_EQUIVALENCE)
    if judged is None:
        return Score(value=0.0, detail={**detail, "by": "normalised match"})
    if judged.value is None:
        return Score.undefined(judged.reason or "judge error", n_errors=judged.n_errors)
    return Score(
        value=1.0 if judged.value >= 4.0 else 0.0,
        samples=judged.samples,
        detail={**detail, "by": "judge equivalence (correctness >= 4)", "judge": judged.value},
    )


@metric(
    "latency_s",
    direction="lower",
    kind="deterministic",
    unit="s",
    scale="continuous",
    group="cost",
    description="wall time of the pipeline for the case (judges excluded); undefined when a "
    "model call came from the response cache (a cached answer carries no latency)",
)
def latency_s(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    tokens = obs.trace.tokens if obs.trace is not None else None
    if tokens is not None and tokens.cached_calls:
        return Score.undefined(
            f"cached: {tokens.cached_calls} of {tokens.llm_calls} model call(s) came from the "
            "response cache, so no latency was measured"
        )
    return Score(value=round(obs.latency_s, 6))


@metric(
    "tokens",
    direction="lower",
    kind="deterministic",
    unit="tokens",
    scale="continuous",
    group="cost",
    description="candidate input + output tokens for the case (judges excluded)",
)
def tokens(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    return Score(
        value=float(obs.input_tokens + obs.output_tokens),
        detail={"input": obs.input_tokens, "output": obs.output_tokens},
    )


@metric(
    "cost_usd",
    direction="lower",
    kind="deterministic",
    unit="USD",
    scale="continuous",
    group="cost",
    description="candidate cost for the case (judges excluded)",
)
def cost_usd(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    if obs.cost_usd is None:
        return Score.undefined("model not in the price table")
    return Score(value=obs.cost_usd)
