"""How a refusal is recognised, and the default refusal wording.

:data:`REFUSAL_MARKERS` holds every shipped prompt's ``REJECTION_TRIGGER_KEYWORDS`` (the
pipeline replaces an answer containing one of them with the prompt's ``REJECTION_ANSWER``),
plus the common Chinese and English refusal phrases a model uses on its own. The prompts
live above this ground-floor package, so the agreement is a test
(``tests/unit/text/test_refusal.py`` loads the registry): a new prompt whose trigger or
rejection answer is not recognised here fails it.

Matching is case-insensitive substring search on the NFKC form.
"""

from __future__ import annotations

from app.text.analyser import has_cjk
from app.text.normalise import fold

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
    low = fold(text)
    return any(marker in low for marker in REFUSAL_MARKERS)


def default_refusal(question: str) -> str:
    """The default refusal in the question's language (Chinese when it has CJK)."""
    return DEFAULT_REFUSAL_ZH if has_cjk(question) else DEFAULT_REFUSAL_EN
