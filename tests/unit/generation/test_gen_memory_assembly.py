"""Summary memory (seed 000) and score-aware assembly (seed 002 / 004 §5.3)."""

from __future__ import annotations

import pytest

from app.errors import BudgetExceeded
from app.generation.pipeline.assembly import Floors, format_context, layout_for, select
from app.generation.pipeline.memory import (
    SummaryMemory,
    first_line,
    format_messages,
    offline_summarize,
)
from app.llm.tokens import get_counter
from app.llm.types import Message as M
from app.retrieval.index import Hit
from app.retrieval.kb import Chunk

COUNTER = get_counter("bpe:cl100k_base")


def _history(pairs: int) -> list[M]:
    out: list[M] = []
    for i in range(pairs):
        out += [
            M("user", f"第{i}个问题：年假怎么申请？"),
            M("assistant", f"第{i}个回答：在OA系统提交。"),
        ]
    return out


class Summaries:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, summary: str, new_lines: str) -> tuple[str, str | None]:
        self.calls.append((summary, new_lines))
        return f"概要{len(self.calls)}\n\n这一段被丢弃", "summary/summarize_zh_v1"


def test_bpe_counter_is_real() -> None:
    assert COUNTER.name == "bpe:cl100k_base"
    assert COUNTER.count("hello world") == 2  # cl100k_base: "hello", " world"


async def test_below_budget_returns_plain_history() -> None:
    summaries = Summaries()
    history = _history(2)
    result = await SummaryMemory(COUNTER, summaries, "zh").load(history, 2000, 500)
    assert result.chat_history == format_messages(history, "zh")
    assert (
        result.chat_history.startswith("用户: 第0个问题")
        and "\nAssistant: 第0个回答" in result.chat_history
    )
    assert result.summary is None and result.summarised_pairs == 0 and summaries.calls == []
    assert result.counter == "bpe:cl100k_base" and result.budget_tokens == 1500


async def test_over_budget_summarises_oldest_pairs_keeps_newest_verbatim() -> None:
    history = _history(6)
    per_pair = COUNTER.count(format_messages(history[:2], "zh"))
    budget = per_pair * 2 + 5  # room for two pairs only
    summaries = Summaries()
    result = await SummaryMemory(COUNTER, summaries, "zh").load(history, 1000 + budget, 1000)
    assert result.summarised_pairs == 4 and len(result.recent) == 4
    assert result.recent == tuple(history[-4:])
    # recursive: each call gets the previous summary and the next oldest pair
    assert [c[0] for c in summaries.calls] == ["", "概要1", "概要2", "概要3"]
    assert "第0个问题" in summaries.calls[0][1] and "第3个问题" in summaries.calls[3][1]
    assert result.summary == "概要4"  # first line only
    assert result.chat_history == (
        "历史对话概要:\n概要4\n最近的对话:\n" + format_messages(history[-4:], "zh")
    )
    assert result.summary_prompt_version == "summary/summarize_zh_v1"


async def test_english_headers() -> None:
    history = [
        M("user", "How many days of leave do I get? " * 20),
        M("assistant", "Five. " * 20),
    ] * 3
    result = await SummaryMemory(COUNTER, offline_summarize, "en").load(history, 400, 150)
    assert result.chat_history.startswith("A summarization of historical conversation:\n")
    assert "\nMost recent conversation:\nHuman: How many" in result.chat_history


async def test_fewer_than_two_messages_still_too_long_raises() -> None:
    history = [M("user", "很长的问题" * 200), M("assistant", "很长的回答" * 200)]
    with pytest.raises(BudgetExceeded, match=r"does not fit.*bpe:cl100k_base.*max_tokens"):
        await SummaryMemory(COUNTER, offline_summarize, "zh").load(history, 2000, 1900)


def test_first_line_and_offline_summary() -> None:
    assert first_line("\n概要一行\n第二行\n\n第二段") == "概要一行"


async def test_offline_summarizer_is_one_line() -> None:
    text, version = await offline_summarize("旧概要", "用户: 年假几天？\nAssistant: 五天。")
    assert text == "旧概要；年假几天？ → 五天。" and version is None and "\n" not in text


# -- assembly --------------------------------------------------------------------------
def _hits(*scores: float) -> list[Hit]:
    return [
        Hit(
            Chunk(
                f"kb:d{i}.md#0",
                f"d{i}.md",
                f"文档{i}",
                "节",
                ("public",),
                f"## 节\n\n正文{i} <b>&</b>",
                0,
            ),
            s,
        )
        for i, s in enumerate(scores)
    ]


def test_zero_hits() -> None:
    asm = select([])
    assert asm.mode == "no_hits" and asm.documents == () and asm.top1 is None


def test_refusal_below_low_floor_has_no_context() -> None:
    asm = select(_hits(0.44, 0.3))
    assert asm.mode == "refusal" and asm.documents == ()


def test_strict_keeps_docs_within_ratio_at_most_two() -> None:
    asm = select(_hits(0.95, 0.80, 0.72, 0.70))  # 0.75·0.95 = 0.7125
    assert asm.mode == "strict" and asm.chunk_ids == ["kb:d0.md#0", "kb:d1.md#0"]
    asm = select(_hits(0.90, 0.60))  # 0.60 < 0.675
    assert asm.mode == "strict" and asm.chunk_ids == ["kb:d0.md#0"]


def test_assisted_keeps_docs_above_low_floor_at_most_three() -> None:
    asm = select(_hits(0.87, 0.5, 0.46, 0.45, 0.44))
    assert asm.mode == "assisted" and len(asm.documents) == 3
    asm = select(_hits(0.60, 0.44))
    assert asm.mode == "assisted" and asm.chunk_ids == ["kb:d0.md#0"]


def test_floors_are_configurable() -> None:
    floors = Floors(low=0.2, high=0.5)
    assert select(_hits(0.3), floors).mode == "assisted"
    assert select(_hits(0.55), floors).mode == "strict"
    assert select(_hits(0.1), floors).mode == "refusal"


def test_context_numbering_and_escaping() -> None:
    asm = select(_hits(0.9, 0.85))
    xml = asm.context("xml")
    assert xml.startswith(
        '<document index="1" title="文档0" section="节">\n[1] 正文0 &lt;b&gt;&amp;&lt;/b&gt;'
    )
    assert '<document index="2"' in xml and "<b>" not in xml
    colossal = format_context(asm.documents, "colossalqa")
    assert (
        colossal.startswith("Supporting Document1:\n正文0")
        and "\n\nSupporting Document2:" in colossal
    )
    assert (
        layout_for("system/retrieval_qa_zh") == "colossalqa" and layout_for("system/kb_qa") == "xml"
    )
    assert asm.documents_json().startswith('["正文0')


def test_documents_json_is_json_dumps_of_the_bodies() -> None:
    """metadata["documents"] is built from each body's JSON kept per chunk text: it must be
    json.dumps of the list of bodies (separators, escapes, no documents) on the sample KB."""
    import json

    from app.generation.pipeline.assembly import Assembly, body
    from app.paths import kb_dir
    from app.retrieval.kb import load_kb

    chunks = list(load_kb(kb_dir()).chunks)
    odd = Chunk("x", "d.md", "t", "", ("public",), '引号 "q" \\ \n\t\u2028 é </document>', 0)
    chunks.append(odd)
    assert len(chunks) > 100
    for k in range(len(chunks)):
        docs = tuple(Hit(c, 0.9) for c in chunks[k : k + k % 4])
        want = json.dumps([body(h.chunk) for h in docs], ensure_ascii=False)
        assert Assembly("assisted", 0.9, docs).documents_json() == want
    assert Assembly("refusal", 0.1, ()).documents_json() == "[]"
