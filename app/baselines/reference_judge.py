"""``offline:reference-judge`` — a deterministic, network-free *baseline* judge.

It answers the judge prompts with the JSON they ask for — ``{"score": 1-5,
"reasoning": "..."}``, plus ``"hallucinations": [...]`` for faithfulness — computed from
term overlap (the analyser of :mod:`app.text`, query side: jieba for Chinese, lowercase
stemmed words for English, stop words and ``[n]`` citations removed; a term is found in a
text by :class:`app.text.Matcher`: CJK terms as substrings, other terms as whole tokens).
The metric comes from ``metadata["judge_metric"]`` and picks that metric's rule from the
rules handed in through :func:`use_rules` (the harness's judge table installs its own: each
judge metric's entry carries its rule, defined next to the judge in
``app/eval/scoring/judged.py``); the texts come from ``variables`` (``candidate``,
``context``, ``golden_answer``, ``question``). The built-in rules use these overlap
measures:

faithfulness
    support = share of the candidate's distinct content tokens found in the context.
    A candidate sentence with support < 0.5 is listed under ``hallucinations``.
    A refusal (it claims nothing) scores 5; an empty answer scores 1.
correctness
    If the golden answer is a refusal (``metadata["expected_refusal"] == "true"`` or it
    contains a refusal phrase, see ``app.text.REFUSAL_MARKERS``): 5 when the candidate is a
    refusal too, else 1. If only the candidate refuses: 1. Otherwise recall = share of
    the golden answer's distinct content tokens found in the candidate; when a number in
    the golden answer is missing from the candidate the score is capped at 3.
relevance
    share of the question's distinct content tokens found in the candidate; a refusal
    scores 3 (it addresses the question without answering it).

Share → score: ≥ 0.8 → 5, ≥ 0.6 → 4, ≥ 0.4 → 3, ≥ 0.2 → 2, else 1 (faithfulness and
correctness); relevance uses ≥ 0.6 / 0.45 / 0.3 / 0.15 because answers rephrase questions.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping

from app.baselines.extractive import offline_completion
from app.errors import ConfigError
from app.llm.providers.base import Provider
from app.llm.types import ChatRequest, Completion
from app.text import Matcher, is_refusal, numbers, sentences, strip_citations, tokenize

# (prompt variables, request metadata) -> {"score": 1-5, "reasoning": ..., ...}
OfflineRule = Callable[[Mapping[str, str], Mapping[str, str]], dict[str, object]]
# () -> judge metric -> its offline rule
RuleSource = Callable[[], Mapping[str, OfflineRule]]
_SOURCE: list[RuleSource] = []


def use_rules(source: RuleSource) -> None:
    """Answer each judge metric with the rule ``source()`` gives for it (the seam the judge
    table above this package uses: the rules live with their judges, not here)."""
    _SOURCE[:] = [source]


def rules() -> Mapping[str, OfflineRule]:
    """The rule of every judge metric, as the installed source gives them now."""
    return _SOURCE[0]() if _SOURCE else {}


BANDS = (0.8, 0.6, 0.4, 0.2)
RELEVANCE_BANDS = (0.6, 0.45, 0.3, 0.15)
HALLUCINATION_SUPPORT = 0.5


def band(share: float, bands: tuple[float, ...] = BANDS) -> int:
    for i, edge in enumerate(bands):
        if share >= edge:
            return 5 - i
    return 1


# A case's three rules read the same few texts (the candidate, its sentences, the context):
# each text is analysed once — both are pure functions of the text, and the results are only
# read. Small and bounded, so nothing grows with a run.
@functools.lru_cache(maxsize=512)
def _terms(part: str) -> frozenset[str]:
    return frozenset(tokenize(strip_citations(part)))


@functools.lru_cache(maxsize=64)
def _matcher(whole: str) -> Matcher:
    return Matcher(whole)


@functools.lru_cache(maxsize=64)
def _refuses(text: str) -> bool:
    """:func:`app.text.is_refusal`, once per text: each of a case's rules asks it of the
    same candidate."""
    return is_refusal(text)


def share(part: str, whole: str) -> tuple[float, int]:
    """(share of ``part``'s distinct content tokens found in ``whole``, their count)."""
    need = _terms(part)
    if not need:
        return 0.0, 0
    have = _matcher(whole)
    return sum(1 for t in need if t in have) / len(need), len(need)


def faithfulness(candidate: str, context: str) -> dict[str, object]:
    if not candidate.strip():
        return {"score": 1, "reasoning": "empty answer", "hallucinations": []}
    if _refuses(candidate):
        return {
            "score": 5,
            "reasoning": "the answer is a refusal and makes no claim beyond the context",
            "hallucinations": [],
        }
    support, n = share(candidate, context)
    unsupported = [s for s in sentences(candidate) if share(s, context)[0] < HALLUCINATION_SUPPORT]
    return {
        "score": band(support),
        "reasoning": f"{support:.0%} of the answer's {n} content tokens appear in the context",
        "hallucinations": unsupported,
    }


def correctness(candidate: str, golden: str, expected_refusal: bool) -> dict[str, object]:
    golden_refuses = expected_refusal or _refuses(golden)
    cand_refuses = _refuses(candidate)
    if golden_refuses:
        ok = cand_refuses
        return {
            "score": 5 if ok else 1,
            "reasoning": "the reference is a refusal and the answer "
            + ("refuses too" if ok else "does not refuse"),
        }
    if cand_refuses:
        return {"score": 1, "reasoning": "the answer refuses but the reference answers"}
    recall, n = share(golden, candidate)
    score = band(recall)
    note = ""
    # a missing number caps the score at 3: only a score above 3 needs the numbers
    missing = sorted(set(numbers(golden)) - set(numbers(candidate))) if score > 3 else []
    if missing:
        score = 3
        note = f"; numbers of the reference missing from the answer: {', '.join(missing)}"
    return {
        "score": score,
        "reasoning": f"the answer covers {recall:.0%} of the reference's {n} content tokens" + note,
    }


def relevance(candidate: str, question: str) -> dict[str, object]:
    if _refuses(candidate):
        return {"score": 3, "reasoning": "the answer is a refusal: on topic but no answer"}
    overlap, n = share(question, candidate)
    return {
        "score": band(overlap, RELEVANCE_BANDS),
        "reasoning": f"the answer addresses {overlap:.0%} of the question's {n} content tokens",
    }


def judge(request: ChatRequest) -> dict[str, object]:
    """The verdict of the rule registered for ``metadata["judge_metric"]``."""
    metric = request.metadata.get("judge_metric", "")
    known = rules()
    rule = known.get(metric)
    if rule is None:
        raise ConfigError(
            f"offline:reference-judge: metadata['judge_metric'] is {metric!r}; "
            f"set it to one of {', '.join(known) or '(none registered)'} (a judge metric "
            "brings its offline rule in its entry: @judge_metric(..., offline=RULE))"
        )
    return rule(request.variables, request.metadata)


class ReferenceJudgeProvider(Provider):
    """Deterministic overlap judge; see the module docstring for its rules.

    The verdict is a pure function of the request (``deterministic``): the judges ask it
    once per metric and case and repeat that verdict for the other samples
    (:func:`app.eval.scoring.judges.run_judge`), so it keeps no verdicts of its own."""

    family = "offline"
    cacheable = False
    deterministic = True
    in_process = True

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        text = json.dumps(judge(request), ensure_ascii=False)
        return offline_completion(request, text, model)
