"""The KB loader's access rule and the chunker's documented rule, on hand-made documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import DatasetError
from app.retrieval.kb import MAX_CHARS, can_read, chunk_document, load_kb, parse_document

DOC = """---
title: 差旅费报销制度
acl: [employee]
---
# 差旅费报销制度

第一段。

## 住宿标准

一线城市酒店上限 600 元/晚。

二线城市酒店上限 450 元/晚。
## 交通
高铁二等座。
"""


def test_headings_start_chunks_and_paragraphs_stay_together() -> None:
    doc = parse_document("sample", "finance/travel.md", DOC)
    chunks = chunk_document(doc)
    # three headings -> three chunks, numbered in document order
    assert [c.chunk_id for c in chunks] == [
        "sample:finance/travel.md#0",
        "sample:finance/travel.md#1",
        "sample:finance/travel.md#2",
    ]
    assert chunks[0].text == "# 差旅费报销制度\n\n第一段。"
    assert (
        chunks[1].text
        == "## 住宿标准\n\n一线城市酒店上限 600 元/晚。\n\n二线城市酒店上限 450 元/晚。"
    )
    # a heading directly followed by text (no blank line) still starts its own chunk
    assert chunks[2].text == "## 交通\n\n高铁二等座。"
    assert chunks[2].heading == "交通"
    assert all(c.acl == ("employee",) for c in chunks)


def test_overflowing_paragraphs_close_the_chunk_and_repeat_the_heading() -> None:
    para_a = "甲" * 250 + "。"
    para_b = "乙" * 250 + "。"
    doc = parse_document(
        "kb", "x.md", f"---\ntitle: t\nacl: public\n---\n# H\n\n{para_a}\n\n{para_b}\n"
    )
    chunks = chunk_document(doc)
    assert [c.text for c in chunks] == [f"# H\n\n{para_a}", f"# H\n\n{para_b}"]


def test_a_paragraph_longer_than_the_limit_is_cut_at_sentence_ends() -> None:
    sentence = "丙" * 150 + "。"  # 151 chars
    para = sentence * 4  # 604 chars > MAX_CHARS
    doc = parse_document("kb", "y.md", f"---\ntitle: t\nacl: public\n---\n{para}\n")
    chunks = chunk_document(doc)
    assert [len(c.text) for c in chunks] == [302, 302]
    assert "".join(c.text for c in chunks) == para
    assert all(len(c.text) <= MAX_CHARS for c in chunks)


def test_chunking_is_deterministic() -> None:
    doc = parse_document("sample", "finance/travel.md", DOC)
    assert chunk_document(doc) == chunk_document(doc)


@pytest.mark.parametrize(
    ("user", "doc", "expected"),
    [
        (["public"], ["public"], True),
        ([], ["public"], True),  # everyone holds public
        (["public"], ["employee"], False),
        (["employee"], ["employee"], True),
        (["employee"], ["hr"], False),  # no implicit hierarchy
        (["employee", "hr"], ["hr"], True),
        (["exec"], ["finance", "exec"], True),
    ],
)
def test_access_rule(user: list[str], doc: list[str], expected: bool) -> None:
    assert can_read(user, doc) is expected


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("# no front matter\n", "front matter missing"),
        ("---\nacl: [public]\n---\nx", "'title' is missing"),
        ("---\ntitle: t\n---\nx", "'acl' is missing"),
        ("---\ntitle: t\nacl: [everyone]\n---\nx", "unknown"),
    ],
)
def test_bad_front_matter_is_a_clear_error(raw: str, needle: str) -> None:
    with pytest.raises(DatasetError, match=needle):
        parse_document("kb", "bad.md", raw)


def test_load_kb_sorts_files_and_skips_readme(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.md").write_text("---\ntitle: Z\nacl: [hr]\n---\nz\n", encoding="utf-8")
    (tmp_path / "a.md").write_text(
        "\ufeff---\r\ntitle: A\r\nacl: public\r\n---\r\na\r\n", encoding="utf-8"
    )
    (tmp_path / "README.md").write_text("not a document", encoding="utf-8")
    kb = load_kb(tmp_path, name="t")
    assert [c.chunk_id for c in kb.chunks] == ["t:a.md#0", "t:b/z.md#0"]
    assert kb.chunk("t:b/z.md#0") is not None and kb.chunk("t:b/z.md#0").acl == ("hr",)  # type: ignore[union-attr]
    assert [c.chunk_id for c in kb.readable_chunks(["public"])] == ["t:a.md#0"]
