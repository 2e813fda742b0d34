"""Refusal markers agree with the prompts: every shipped prompt's REJECTION_TRIGGER_KEYWORDS
and REJECTION_ANSWER are recognised by app.text.is_refusal (the hand copy the markers used
to be missed 未收录, the trigger of system/kb_mode_refusal)."""

from __future__ import annotations

from app.generation.registry import PromptSpec, load_registry
from app.text import (
    DEFAULT_REFUSAL_EN,
    DEFAULT_REFUSAL_ZH,
    REFUSAL_MARKERS,
    default_refusal,
    is_refusal,
)


def _qa_specs() -> list[PromptSpec]:
    return [s for s in load_registry().specs() if s.rejection_trigger_keywords]


def test_every_prompt_trigger_keyword_is_a_refusal_marker() -> None:
    specs = _qa_specs()
    assert len(specs) >= 8  # the system/* QA prompts (kb_qa, kb_mode_*, retrieval_qa_*)
    missing = [
        (f"{s.category}/{s.slug}_v{s.version}", kw)
        for s in specs
        for kw in s.rejection_trigger_keywords
        if not is_refusal(kw)
    ]
    assert missing == []
    assert "未收录" in REFUSAL_MARKERS


def test_every_prompt_rejection_answer_is_a_refusal() -> None:
    answers = {s.rejection_answer for s in _qa_specs()}
    assert answers and all(isinstance(a, str) and is_refusal(a) for a in answers)


def test_refusal_matching() -> None:
    assert is_refusal("抱歉，知识库中未收录与您问题直接相关的内容。")
    assert is_refusal("根据现有资料无法确定。")
    assert is_refusal("I CANNOT ANSWER that.")  # case-insensitive
    assert is_refusal("ｃａｎｎｏｔ ａｎｓｗｅｒ")  # full-width (NFKC)
    assert not is_refusal("超出部分由个人承担。")  # bare 超出 is a policy, not a refusal
    assert not is_refusal("年假为 5 天。")
    assert default_refusal("年假几天？") == DEFAULT_REFUSAL_ZH
    assert default_refusal("How many days?") == DEFAULT_REFUSAL_EN
    assert is_refusal(DEFAULT_REFUSAL_ZH) and is_refusal(DEFAULT_REFUSAL_EN)
