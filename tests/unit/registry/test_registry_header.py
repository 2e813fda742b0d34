"""The docstring header parses into typed data (Chinese and English keys, baselines)."""

from __future__ import annotations

from datetime import date

from app.generation.registry.header import parse_header

ZH = """
Prompt: KB 主回答
版本: v2
用途: 企业知识库主回答 system prompt
适用模型: claude-sonnet-4-6, claude-opus-4-7
创建人: 张三 (2026-04-01)
最近修改: 李四 (2026-05-10)
变更摘要:
- v2 (2026-05-10): 强化拒答指令
- v1 (2026-04-01): 初版
评测基线:
- smoke set: faithfulness=4.35, correctness=4.20 (2026-05-10)
- full set: faithfulness=4.21, correctness=4.05 (2026-05-09)
"""

EN = """
Prompt: KB answer
Version: v3
Purpose: main answer
Models: gpt-4o
Author: Alice (2026-01-02)
Changes:
- v3 (2026-03-01): stricter
Baseline:
- smoke: faithfulness=4.5 (2026-03-02)
- smoke: faithfulness=high (2026-03-02)
"""


def test_chinese_header() -> None:
    h = parse_header(ZH, first_line=1)
    assert (h.name, h.version, h.purpose) == ("KB 主回答", "v2", "企业知识库主回答 system prompt")
    assert h.models == ("claude-sonnet-4-6", "claude-opus-4-7")
    assert h.author is not None and (h.author.name, h.author.date) == ("张三", date(2026, 4, 1))
    assert h.modified is not None and h.modified.name == "李四"
    assert [(c.version, c.date, c.summary) for c in h.changes] == [
        (2, date(2026, 5, 10), "强化拒答指令"),
        (1, date(2026, 4, 1), "初版"),
    ]
    assert [(b.suite, b.metrics, b.date) for b in h.baselines] == [
        ("smoke set", (("faithfulness", 4.35), ("correctness", 4.2)), date(2026, 5, 10)),
        ("full set", (("faithfulness", 4.21), ("correctness", 4.05)), date(2026, 5, 9)),
    ]
    assert h.baselines[0].metric("correctness") == 4.2
    assert h.baselines[0].line == 12  # line 1 is the opening quotes, line 2 "Prompt:"
    assert h.issues == ()


def test_english_header_and_malformed_baseline() -> None:
    h = parse_header(EN, first_line=5)
    assert (h.version, h.models, h.purpose) == ("v3", ("gpt-4o",), "main answer")
    assert [b.metrics for b in h.baselines] == [(("faithfulness", 4.5),)]
    assert [(i.kind, i.line) for i in h.issues] == [("malformed-baseline", 5 + 10)]


def test_missing_fields_reported() -> None:
    h = parse_header("\nPrompt: x\n版本: v1\n", first_line=1)
    assert sorted(i.field for i in h.issues if i.kind == "missing-field") == [
        "author",
        "changes",
        "models",
        "purpose",
    ]


def test_an_impossible_date_is_a_header_issue() -> None:
    """`创建人: 张三 (2026-13-45)` passed: the person's date was dropped silently."""
    bad = ZH.replace("张三 (2026-04-01)", "张三 (2026-13-45)").replace(
        "- v1 (2026-04-01)", "- v1 (2026-02-30)"
    )
    h = parse_header(bad, first_line=1)
    found = {(i.kind, i.field, i.line) for i in h.issues}
    assert ("malformed-date", "author", 6) in found and ("malformed-change", "changes", 10) in found
    assert not parse_header(ZH, first_line=1).issues
