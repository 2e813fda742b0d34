"""LLM-as-judge: registry prompts, temperature 0, ``n`` samples, typed and parsed results.

* The judge metrics, their registry prompts and variables are the rows of the judge table
  (:mod:`app.eval.scoring.registry`; built-in rows in :mod:`app.eval.scoring.judged`). Each call
  sets ``metadata["judge_metric"]``.
* ``n`` samples per case and metric use distinct ``sample_index`` values, so the response
  cache keeps them apart; the score is their mean, the spread (max − min) is kept. A
  judge whose provider is ``deterministic`` (the offline reference judge) is asked once per
  case and metric: its other samples repeat that verdict (indices ``0..n-1``, cost counted
  once), so the report's samples, mean and spread are what ``n`` calls would give, and
  the engine counts only the calls made; ``meta.judge.warnings`` says so.
* A response must be JSON with a numeric ``score`` in 1–5 (``reasoning`` optional). One
  repair attempt asks the judge to restate its answer as that JSON; if that fails too, the
  sample is a recorded judge error — the metric is ``null`` with the reason and counted in
  ``n_errors``; it is never turned into a score and never skipped silently. A metric with
  any errored sample is ``null`` (a mean over fewer samples would be a different ruler).
* The judge may not be the candidate model or a lower tier (:data:`JUDGE_TIERS`) unless
  ``allow_weak`` is set, in which case the warning goes into the report.
* A weak judge (:func:`weak_judge`: one allowed by ``allow_weak``, or the local model tier,
  which is weak by design) is labelled so in the report (``meta.judge.weak``) and never
  gates: the run's status leaves its metrics' thresholds out (app.eval.report.status).
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.errors import ConfigError, JudgeParseError, ProviderError
from app.eval.scoring.base import Score
from app.eval.scoring.registry import JudgeInput, JudgeMetric
from app.llm.types import ChatRequest, EngineLike, Message

if TYPE_CHECKING:
    from app.generation.registry import RenderedPrompt
    from app.llm.spec import ModelRef, ProviderSpec

# Capability tiers (higher is stronger), first match wins; patterns are fnmatch on the
# model id without provider prefix. A judge must be a *different* model of the same or a
# higher tier than the candidate. Unknown models are allowed with a warning.
JUDGE_TIERS: tuple[tuple[str, int], ...] = (
    ("claude-opus-*", 3),
    ("claude-3-opus*", 3),
    ("claude-sonnet-*", 2),
    ("claude-3-5-sonnet*", 2),
    ("claude-3-7-sonnet*", 2),
    ("claude-haiku-*", 1),
    ("claude-3-5-haiku*", 1),
    ("claude-3-haiku*", 1),
    ("gpt-5-mini*", 2),
    ("gpt-5-nano*", 1),
    ("gpt-5*", 3),
    ("o1*", 3),
    ("o3*", 3),
    ("gpt-4.1-nano*", 1),
    ("gpt-4.1-mini*", 1),
    ("gpt-4.1*", 2),
    ("gpt-4o-mini*", 1),
    ("gpt-4o*", 2),
    ("qwen2-7b*", 1),
    ("llama-2-*", 1),
)

REPAIR_INSTRUCTION = (
    "Your previous reply could not be parsed. Reply again with only one JSON object, "
    'no other text: {"score": <integer 1-5>, "reasoning": "<one sentence>"}'
)
# The reply every judge prompt asks for, as a JSON Schema: sent with each judge request, so a
# server that constrains its output (the local llama.cpp tier turns it into a grammar) can
# only answer a parseable score. The score comes first (a reply cut by max_tokens inside the
# reasoning still has it, though it does not parse) and the reasoning is short enough for a
# small model's tokenizer to finish within the judge's 512 tokens.
JUDGE_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"enum": [1, 2, 3, 4, 5]},
        "reasoning": {"type": "string", "maxLength": 80},
    },
    "required": ["score", "reasoning"],
    "additionalProperties": False,
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


class Renderer(Protocol):
    """Renders a registry prompt for a model (``PipelineFactory.render``, ``registry.render``)."""

    def __call__(
        self, prompt_id: str, model: ModelRef, variables: Mapping[str, str]
    ) -> RenderedPrompt: ...


@dataclass(frozen=True, slots=True)
class JudgeSample:
    index: int
    score: float | None
    reasoning: str | None = None
    error: str | None = None
    repaired: bool = False
    cost_usd: float = 0.0


@dataclass(frozen=True)
class JudgeConfig:
    """``model``: the judge, parsed at the edge (``RunConfig.judge_ref``, the CLI)."""

    model: ModelRef
    samples: int = 3
    allow_weak: bool = False
    max_tokens: int = 512


def tier(ref: ModelRef) -> int | None:
    if ref.offline:
        return None
    for pattern, level in JUDGE_TIERS:
        if fnmatch.fnmatch(ref.model, pattern):
            return level
    return None


def _refused(cand: ModelRef, jud: ModelRef) -> str | None:
    """Why :func:`check_judge` refuses ``jud`` for ``cand`` without ``allow_weak``."""
    candidate, judge = cand.raw, jud.raw
    if (cand.family, cand.model) == (jud.family, jud.model):
        return f"judge {judge} is the candidate model itself"
    if jud.offline:
        return None
    t_cand, t_judge = tier(cand), tier(jud)
    if t_judge is not None and t_cand is not None and t_judge < t_cand:
        return (
            f"judge {judge} (tier {t_judge}) is weaker than candidate {candidate} (tier {t_cand})"
        )
    return None


def weak_judge(cand: ModelRef, jud: ModelRef) -> str | None:
    """Why ``judge`` is weak for ``candidate`` (``None``: it is not): the local model tier
    (weak by design), the candidate itself, or a lower tier than the candidate's (the last
    two are refused by :func:`check_judge` unless ``allow_weak``)."""
    if jud.family == "local":
        return f"{jud.raw} is the local model tier (a small model for plumbing, not a ruler)"
    return _refused(cand, jud)


def check_judge(cand: ModelRef, jud: ModelRef, *, allow_weak: bool = False) -> list[str]:
    """Warnings to record; raises :class:`ConfigError` for a refused judge. Both are
    parsed model strings of providers (the run's :attr:`RunConfig.model_ref` /
    ``judge_ref``)."""
    judge = jud.raw
    warnings: list[str] = []
    problem = _refused(cand, jud)
    if problem is None and jud.offline:
        warnings.append(
            f"{judge} is an offline reference-based judge: its scores are not a model's"
        )
    elif problem is None and tier(jud) is None and jud.family != "local":
        # the local tier has no tier by design: its WEAK JUDGE warning below says so
        warnings.append(f"judge {judge} is not in JUDGE_TIERS: tier not checked")
    if deterministic(jud.require_provider()):
        warnings.append(
            f"{judge} is deterministic (its verdict is a pure function of the request): "
            "it is asked once per metric and case, and the other samples repeat that verdict"
        )
    if jud.family == "local":
        warnings.append(
            f"WEAK JUDGE: {judge} is the local model tier (a small model for plumbing, not a "
            "ruler): its scores are reported, its metrics' thresholds never gate the run"
        )
    if jud.family == "anthropic":
        warnings.append(
            f"{judge}: temperature 0 is not sent — the Anthropic API version the installed SDK "
            "speaks has no sampling parameters — so repeat judge samples may differ"
        )
    if problem is not None:
        if not allow_weak:
            raise ConfigError(
                f"{problem}; use a stronger judge (e.g. anthropic:claude-opus-4-7 for a Sonnet "
                "candidate) or pass --allow-weak-judge to override (recorded in the report)"
            )
        warnings.append(f"WEAK JUDGE (--allow-weak-judge): {problem}")
    return warnings


def parse_judge(text: str) -> tuple[float, str]:
    """``(score, reasoning)`` from a judge reply, or :class:`JudgeParseError`."""
    body = text.strip()
    if "`" in body:  # a fenced reply (the replacement finds nothing in any other)
        body = _FENCE.sub("", body)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise JudgeParseError(f"no JSON object in judge reply: {text[:80]!r}")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"unparseable JSON ({exc.msg}): {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise JudgeParseError("judge reply is not a JSON object")
    score = data.get("score")
    if isinstance(score, str):
        try:
            score = float(score.strip())
        except ValueError:
            raise JudgeParseError(f"score is not a number: {score!r}") from None
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise JudgeParseError(f"score missing or not a number: {score!r}")
    if not 1 <= score <= 5:
        raise JudgeParseError(f"score {score} outside 1-5")
    reasoning = data.get("reasoning", "")
    return float(score), reasoning if isinstance(reasoning, str) else json.dumps(reasoning)


def _repair_request(request: ChatRequest, bad: str) -> ChatRequest:
    messages = (*request.messages, Message("assistant", bad), Message("user", REPAIR_INSTRUCTION))
    prompt_text = request.prompt_text
    if prompt_text is not None:
        prompt_text = f"{prompt_text}\n{bad}\n\n{REPAIR_INSTRUCTION}\n"
    return replace(request, messages=messages, prompt_text=prompt_text)


async def judge_sample(
    engine: EngineLike, model: ModelRef, request: ChatRequest, index: int
) -> JudgeSample:
    """One judge sample with one repair attempt; errors become a recorded sample."""
    cost = 0.0
    try:
        first = await engine.generate(model, request, sample_index=index)
        cost += first.cost_usd or 0.0
        try:
            score, why = parse_judge(first.text)
            return JudgeSample(index=index, score=score, reasoning=why, cost_usd=cost)
        except JudgeParseError as exc:
            first_error = str(exc)
        second = await engine.generate(
            model, _repair_request(request, first.text), sample_index=index
        )
        cost += second.cost_usd or 0.0
        try:
            score, why = parse_judge(second.text)
        except JudgeParseError as exc:
            return JudgeSample(
                index=index,
                score=None,
                error=f"judge error: {first_error}; after repair: {exc}",
                cost_usd=cost,
            )
        return JudgeSample(index=index, score=score, reasoning=why, repaired=True, cost_usd=cost)
    except ProviderError as exc:
        return JudgeSample(
            index=index, score=None, error=f"judge error: provider: {exc}", cost_usd=cost
        )


def aggregate(samples: Sequence[JudgeSample], version: str) -> Score:
    """Mean of the samples, spread kept; ``null`` with the reasons when any sample failed."""
    values = [s.score for s in samples]
    errors = [s.error for s in samples if s.error is not None]
    detail: dict[str, Any] = {
        "judge_prompt": version,
        "reasoning": [s.reasoning for s in samples],
        "repaired": sum(s.repaired for s in samples),
        "cost_usd": sum(s.cost_usd for s in samples),
    }
    if errors:
        return Score(
            value=None,
            reason=f"{len(errors)}/{len(samples)} judge sample(s) failed: {errors[0]}",
            samples=values,
            n_errors=len(errors),
            detail={**detail, "errors": errors},
        )
    parsed = [v for v in values if v is not None]
    mean = sum(parsed) / len(parsed)
    return Score(
        value=round(mean, 6),
        samples=values,
        spread=max(parsed) - min(parsed),
        detail=detail,
    )


async def run_judge(
    engine: EngineLike,
    config: JudgeConfig,
    metric: str,
    prompt: RenderedPrompt,
    metadata: Mapping[str, str] | None = None,
) -> Score:
    """All samples of one judge metric for one case."""
    request = prompt.to_request(
        temperature=0.0,
        max_tokens=config.max_tokens,
        purpose="judge",
        metadata={**(metadata or {}), "judge_metric": metric},
    )
    if request.response_format == "json":
        request = replace(request, json_schema=JUDGE_REPLY_SCHEMA)
    provider = config.model.require_provider()
    if config.samples > 1 and deterministic(provider):
        first = await judge_sample(engine, config.model, request, 0)
        samples = repeated(first, config.samples)
    else:
        samples = await gather(
            (judge_sample(engine, config.model, request, i) for i in range(config.samples)),
            one_by_one=in_process(provider),
        )
    return aggregate(samples, prompt.qualified_version)


def deterministic(model: ProviderSpec) -> bool:
    """Whether the provider serving ``model`` gives a verdict that is a pure function of
    its request (:attr:`Provider.deterministic <app.llm.providers.base.Provider.deterministic>`):
    asking it again for another sample can only repeat the first one."""
    from app.llm.providers import provider_flag

    return provider_flag(model, "deterministic")


def in_process(model: ProviderSpec) -> bool:
    """Whether the provider serving ``model`` computes in this process with nothing to
    await (:attr:`Provider.in_process <app.llm.providers.base.Provider.in_process>`): its
    samples are then awaited one by one (see :func:`gather`)."""
    from app.llm.providers import provider_flag

    return provider_flag(model, "in_process")


def repeated(first: JudgeSample, n: int) -> list[JudgeSample]:
    """``n`` samples of a deterministic judge from the one it was asked for: the same score,
    reasoning, error and repaired flag with indices ``0..n-1``; its cost is counted once
    (the calls not made cost nothing)."""
    score, why, error, repaired = first.score, first.reasoning, first.error, first.repaired
    return [first, *(JudgeSample(i, score, why, error, repaired, 0.0) for i in range(1, n))]


T = TypeVar("T")


async def gather(aws: Iterable[Awaitable[T]], *, one_by_one: bool) -> list[T]:
    """``asyncio.gather`` of ``aws``, or with ``one_by_one`` each awaited in turn: an offline
    judge computes in this process with nothing to wait for, so tasks to overlap its calls
    would only add their cost (the results and their order are the same either way). One
    awaitable alone is awaited directly, whatever the provider: a task for it has nothing to
    overlap with (a case with one judged metric and one sample: two tasks less per case)."""
    if one_by_one:
        return [await aw for aw in aws]
    pending = list(aws)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


async def score_judge(
    engine: EngineLike,
    config: JudgeConfig,
    entry: JudgeMetric,
    inp: JudgeInput,
    render: Renderer,
) -> Score:
    """One judge metric of the table for one answer: render its prompt, run its samples."""
    prompt = render(entry.prompt, config.model, entry.variables(inp))
    return await run_judge(engine, config, entry.name, prompt, inp.metadata())
