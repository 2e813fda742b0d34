"""The offline rewriter and summariser as the provider's answers to the pipeline's prompts."""

from __future__ import annotations

import json

import pytest

from app.baselines.replies import conversation_from_text, rewrite_reply, summary_reply
from app.cli import main
from app.errors import ProviderError
from app.generation.pipeline.memory import format_messages, offline_summary
from app.generation.pipeline.rewrite import build_history_text
from app.llm.types import ChatRequest
from app.llm.types import Message as M

TWO_TURNS = (
    M("user", "我们在评估A方案和B方案"),
    M("assistant", "从成本看A方案更合适，\n但长期看B方案更好。"),
    M("user", "张三负责哪个区？"),
    M("assistant", "张三负责华南区。"),
)


def test_the_pipelines_history_text_reads_back_in_order() -> None:
    # build_history_text writes newest first with [倒数第n轮] labels and an entity line
    text = build_history_text(list(TWO_TURNS))
    assert text.splitlines()[0].startswith("[倒数第1轮] 用户: 张三负责哪个区？")
    back = conversation_from_text(text)
    assert [m.role for m in back] == ["user", "assistant", "user", "assistant"]
    assert back[0].content == "我们在评估A方案和B方案" and back[3].content == "张三负责华南区。"
    # format_messages (the disambiguation prompt's chat_history) is chronological
    assert conversation_from_text(format_messages(list(TWO_TURNS), "zh")) == TWO_TURNS
    # a fixture's own style: a chronological label and full-width colons
    assert conversation_from_text("[对话第1轮] 用户：李四是财务总监。\nAssistant：好的。") == (
        M("user", "李四是财务总监。"),
        M("assistant", "好的。"),
    )


def test_metadata_history_wins_over_the_variable() -> None:
    history = [M("user", "我们只评估B方案"), M("assistant", "B方案更好。")]
    shown = [M("user", "我们只评估C方案"), M("assistant", "C方案更好。")]  # what the prose says
    request = ChatRequest(
        "extractive",
        None,
        (),
        purpose="rewrite",
        variables={"history": build_history_text(shown), "question": "这个方案的成本呢？"},
        metadata={"history": json.dumps([{"role": m.role, "content": m.content} for m in history])},
    )
    assert json.loads(rewrite_reply(request)) == {
        "original": "这个方案的成本呢？",
        "rewritten": "B方案的成本呢？",
    }
    without = ChatRequest(
        "extractive", None, (), purpose="rewrite", variables=request.variables, metadata={}
    )
    assert json.loads(rewrite_reply(without))["rewritten"] == "C方案的成本呢？"
    bad = ChatRequest("extractive", None, (), purpose="rewrite", metadata={"history": "{"})
    with pytest.raises(ProviderError, match=r"metadata\['history'\] is not a JSON list"):
        rewrite_reply(bad)


def test_summary_reply_is_the_offline_summary() -> None:
    request = ChatRequest(
        "extractive",
        None,
        (),
        purpose="summary",
        variables={"summary": "旧概要", "new_lines": "用户: 年假几天？\nAssistant: 五天。"},
    )
    assert summary_reply(request) == offline_summary(
        "旧概要", "用户: 年假几天？\nAssistant: 五天。"
    )
    assert summary_reply(request) == "旧概要；年假几天？ → 五天。"


def test_prompts_test_on_the_rewrite_fixtures_through_the_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["prompts", "test", "rewrite/standalone", "--model", "offline:extractive"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None), out
    assert "3/3 fixtures passed on offline:extractive" in out
