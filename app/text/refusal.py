"""How a refusal is recognised, and the default refusal wording.

:data:`REFUSAL_MARKERS` holds every shipped prompt's ``REJECTION_TRIGGER_KEYWORDS`` (the
pipeline replaces an answer containing one of them with the prompt's ``REJECTION_ANSWER``),
plus the common Chinese and English refusal phrases a model uses on its own. The prompts
live above this ground-floor package, so the agreement is a test
(``tests/unit/text/test_refusal.py`` loads the registry): a new prompt whose trigger or
rejection answer is not recognised here fails it.

Matching is case-insensitive substring search on the NFKC form (:func:`app.text.match.mentions`): the
metrics, the pipeline's rejection guard (a prompt's trigger keywords) and its uncertainty
check all use it, so a full-width ``Ｉ ＣＡＮＮＯＴ ＡＮＳＷＥＲ`` gets one verdict.

"Refused", for an answer of the pipeline, is :func:`answer_refused`: an answer mode that
refuses (:data:`REFUSAL_MODES`), a rejection keyword substitution, or the prompt's rejection
answer itself (modulo :func:`app.text.normalise.normalise`). The pipeline records it on the
answer and in the answer log; the harness, shadow replay and mining read it from there.
"""

from __future__ import annotations

import functools

from app.text.analyser import has_cjk
from app.text.match import mentions
from app.text.normalise import normalise

#: the pipeline's answer modes that are refusals (``app.generation.pipeline.trace.AnswerMode``
#: holds them all; a test keeps the two in step)
REFUSAL_MODES: frozenset[str] = frozenset({"no_hits", "refusal", "injection_refused"})

#: an answer saying the documents do not settle the question (seed 004 §5.3)
UNCERTAIN_MARKERS: tuple[str, ...] = (
    "无法确定",
    "不能确定",
    "cannot be determined",
    "can't be determined",
)

REFUSAL_MARKERS: tuple[str, ...] = (
    # the prompts' REJECTION_TRIGGER_KEYWORDS (app/generation/prompts/system/*.py)
    "无法确定",
    "无法回答",  # ⊂ 无法回答该问题
    "未收录",
    "cannot answer",  # ⊂ cannot answer the question
    # other wording
    "无法提供",
    "无法找到",
    "没有找到",
    "未找到",
    "没有相关",
    "暂无相关",
    "不知道",
    "抱歉",
    "超出知识库",  # not bare 超出: "超出部分由个人承担" is a policy, not a refusal
    "超出范围",
    "can't answer",
    "unable to answer",
    "not able to answer",
    "cannot be answered",
    "do not contain",
    "does not contain",
    "don't know",
    "do not know",
    "no relevant information",
    "not in the provided",
    "i'm sorry",
    "sorry,",
)
DEFAULT_REFUSAL_ZH = "抱歉，根据现有资料无法回答该问题。"
DEFAULT_REFUSAL_EN = "Sorry, I cannot answer this question from the provided documents."


def is_refusal(text: str) -> bool:
    """True when ``text`` contains one of :data:`REFUSAL_MARKERS`."""
    return mentions(text, REFUSAL_MARKERS)


def is_uncertain(text: str) -> bool:
    """True when ``text`` contains one of :data:`UNCERTAIN_MARKERS`."""
    return mentions(text, UNCERTAIN_MARKERS)


@functools.lru_cache(maxsize=16)
def _normal_rejection(rejection: str) -> str:
    """:func:`normalise` of a prompt's rejection answer: one text for every answer of a run
    (NFKC of a CJK sentence costs tens of microseconds), so it is computed once per text."""
    return normalise(rejection)


def is_rejection_answer(text: str, rejection: str | None) -> bool:
    """``text`` is the prompt's rejection answer, modulo NFKC, case and whitespace."""
    return rejection is not None and normalise(text) == _normal_rejection(rejection)


def answer_refused(mode: str, rejected: bool, text: str, rejection: str | None) -> bool:
    """The one rule for "this answer refused": a refusing ``mode``, a rejection keyword
    substitution (``rejected``), or ``text`` being the ``rejection`` answer itself."""
    return mode in REFUSAL_MODES or rejected or is_rejection_answer(text, rejection)


def default_refusal(question: str) -> str:
    """The default refusal in the question's language (Chinese when it has CJK)."""
    return DEFAULT_REFUSAL_ZH if has_cjk(question) else DEFAULT_REFUSAL_EN
