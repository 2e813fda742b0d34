"""Rewrite (seed 003 §3–4): trigger, window, JSON, guard, cleanup, cache, offline baseline."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from app.errors import ConfigError
from app.generation.pipeline.rewrite import (
    RewriteLLM,
    Rewriter,
    build_history_text,
    changed_ratio,
    cleanup,
    extract_entities,
    find_trigger,
    offline_rewrite,
    parse_rewrite_json,
)
from app.generation.registry import load_registry
from app.llm.engine import Engine, EngineConfig
from app.llm.types import Message as M

ZHANG = [
    M("user", "张三今年第一季度的营收数据出了吗？"),
    M("assistant", "出了，营收同比上涨12%，主要受新品发布拉动。"),
]
PLANS = [
    M("user", "我们在评估A方案和B方案，你觉得哪个更适合我们这种初创团队？"),
    M("assistant", "从成本角度A方案更合适，但从长期扩展性来看B方案更好。"),
]
HUAWEI = [
    M("user", "帮我查一下华为在2023年发布了哪些旗舰手机？"),
    M("assistant", "发布了Mate 60系列、P60系列等。"),
]


def offline_model(engine: Engine, history: list[M]) -> RewriteLLM:
    """The rewrite model seam backed by the real registry and offline:extractive."""
    registry = load_registry()
    conversation = json.dumps([{"role": m.role, "content": m.content} for m in history])

    async def call(prompt_id: str, variables: Mapping[str, str]) -> tuple[str, str]:
        rp = registry.render(prompt_id, model="offline:extractive", variables=variables)
        request = rp.to_request(purpose="rewrite", metadata={"history": conversation})
        completion = await engine.generate("offline:extractive", request)
        assert completion.request_id and completion.request_id.startswith("baseline-rewriter-")
        return completion.text, rp.qualified_version

    return call


class FakeLLM:
    """The rewrite LLM seam: answers JSON from a table and counts calls."""

    def __init__(self, answers: Mapping[str, str] | None = None, raw: str | None = None) -> None:
        self.answers = dict(answers or {})
        self.raw = raw
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def __call__(self, prompt_id: str, variables: Mapping[str, str]) -> tuple[str, str]:
        self.calls.append((prompt_id, dict(variables)))
        if self.raw is not None:
            return self.raw, f"{prompt_id}_v1"
        if "input" in variables:  # disambiguation answers one plain line
            q = variables["input"]
            return self.answers.get(q, q) + "\n", f"{prompt_id}_v1"
        q = variables["question"]
        payload = {"original": q, "rewritten": self.answers.get(q, q)}
        return "```json\n" + json.dumps(payload, ensure_ascii=False) + "\n```", f"{prompt_id}_v1"


SEED_REWRITES = {
    "净利润呢？": "张三今年第一季度的净利润数据是什么？",
    "这个方案的扩展性具体体现在哪些方面？": "B方案在长期扩展性方面的具体体现是什么？",
    "那款折叠屏是哪年发布的？": "华为在对话历史中提及的折叠屏手机（Mate X系列）是哪年发布的？",
}


@pytest.mark.parametrize(
    ("question", "history", "must"),
    [
        ("净利润呢？", ZHANG, ("张三", "第一季度", "净利润")),
        ("这个方案的扩展性具体体现在哪些方面？", PLANS, ("B方案", "扩展性")),
        ("那款折叠屏是哪年发布的？", HUAWEI, ("华为", "折叠屏")),
    ],
)
async def test_seed_examples_llm_path(
    question: str, history: list[M], must: tuple[str, ...]
) -> None:
    llm = FakeLLM(SEED_REWRITES)
    result = await Rewriter("standalone", llm).rewrite(question, history)
    assert len(llm.calls) == 1 and llm.calls[0][0] == "rewrite/standalone"
    assert result.called_llm and not result.reverted and result.prompt_version
    assert result.rewritten == SEED_REWRITES[question]
    for word in must:
        assert word in result.rewritten
    assert "A方案" not in result.rewritten


@pytest.mark.parametrize(
    ("question", "history", "expected"),
    [
        ("净利润呢？", ZHANG, "张三今年第一季度的净利润是什么？"),
        ("这个方案的扩展性具体体现在哪些方面？", PLANS, "B方案的扩展性具体体现在哪些方面？"),
        ("那款折叠屏是哪年发布的？", HUAWEI, "华为的折叠屏是哪年发布的？"),
        ("他的净利润是多少？", ZHANG, "张三的净利润是多少？"),
    ],
)
async def test_seed_examples_offline_baseline(
    question: str, history: list[M], expected: str
) -> None:
    assert offline_rewrite(question, history) == expected
    async with Engine(EngineConfig(cache=False)) as engine:
        for strategy in ("standalone", "disambiguate"):
            model = offline_model(engine, history)
            result = await Rewriter(strategy, model).rewrite(question, history)  # type: ignore[arg-type]
            assert result.rewritten == expected and result.called_llm
            assert result.strategy == strategy and result.prompt_version
        assert engine.stats.by_provider == {"offline:extractive": 2}


async def test_a_rewrite_without_a_model_is_refused() -> None:
    with pytest.raises(ConfigError, match="no rewrite model"):
        await Rewriter("standalone", None).rewrite("净利润呢？", ZHANG)


async def test_unambiguous_question_skips_the_model() -> None:
    llm = FakeLLM(SEED_REWRITES)
    rewriter = Rewriter("standalone", llm)
    for q in ["张三的净利润是多少？", "年假有几天", "其他假期有哪些？", "How many days of leave?"]:
        result = await rewriter.rewrite(q, ZHANG)
        assert result.rewritten == q and not result.triggered
    assert llm.calls == []
    result = await rewriter.rewrite("净利润呢？", [])  # no history → nothing to resolve
    assert result.reason == "no history" and llm.calls == []


def test_trigger_words() -> None:
    assert find_trigger("这个方案的优点是什么") == "这个"
    assert find_trigger("那退款呢？") in {"那", "ellipsis"}
    assert find_trigger("净利润呢？") == "ellipsis"
    assert find_trigger("What about it?") == "it"
    assert find_trigger("And the refund policy?") == "ellipsis"
    assert find_trigger("因此需要审批吗") is None
    assert find_trigger("What is the VPN address?") is None


async def test_over_rewrite_reverts() -> None:
    q = "这个方案的优点和缺点分别是什么？"
    llm = FakeLLM({q: "A方案的成本是多少？"})
    result = await Rewriter("standalone", llm).rewrite(q, PLANS)
    assert result.reverted and result.rewritten == q
    assert result.changed_ratio is not None and result.changed_ratio > 0.5
    assert "over-rewrite" in result.reason


def test_changed_ratio_definition() -> None:
    # insertions are free; the original's content characters must survive in order
    assert changed_ratio("净利润呢？", "张三今年第一季度的净利润数据是什么？") == 0.0
    assert changed_ratio("那款折叠屏是哪年发布的？", "华为的折叠屏是哪年发布的？") == 0.0
    assert (
        changed_ratio(
            "这个方案的扩展性具体体现在哪些方面？", "B方案在长期扩展性方面的具体体现是什么？"
        )
        == 0.4
    )
    assert changed_ratio("这个方案的优点和缺点分别是什么", "A方案的成本是多少") > 0.5


async def test_unparseable_json_falls_back_to_original() -> None:
    llm = FakeLLM(raw="张三的净利润")  # not JSON
    result = await Rewriter("standalone", llm).rewrite("净利润呢？", ZHANG)
    assert result.rewritten == "净利润呢？" and "unparseable" in result.reason
    assert parse_rewrite_json('{"original": "a", "rewritten": ""}') is None
    assert parse_rewrite_json('好的：{"original": "a", "rewritten": "b"}') == "b"


def test_cleanup_removes_temporal_glue_the_user_did_not_write() -> None:
    assert cleanup("刚才提到的张三第一季度净利润是多少", "净利润呢") == "张三第一季度净利润是多少"
    assert cleanup("入职之前要准备什么", "入职之前要准备什么") == "入职之前要准备什么"


async def test_cleanup_applies_to_model_output() -> None:
    q = "净利润呢？"
    llm = FakeLLM({q: "之前提到的张三今年第一季度的净利润是多少？"})
    result = await Rewriter("standalone", llm).rewrite(q, ZHANG)
    assert result.rewritten == "张三今年第一季度的净利润是多少？"


async def test_cache_keyed_on_last_two_turns_and_question() -> None:
    llm = FakeLLM(SEED_REWRITES)
    rewriter = Rewriter("standalone", llm)
    first = await rewriter.rewrite("净利润呢？", ZHANG)
    again = await rewriter.rewrite("净利润呢？", ZHANG)
    assert len(llm.calls) == 1 and again.cached and again.rewritten == first.rewritten
    older = [M("user", "很久以前的问题"), M("assistant", "回答"), *ZHANG]
    await rewriter.rewrite("净利润呢？", older)  # same last two turns? no: 2 turns differ
    assert len(llm.calls) == 2
    await rewriter.rewrite("净利润呢？", [M("user", "更早"), M("assistant", "答"), *older])
    assert len(llm.calls) == 2  # the last two turns are unchanged → cache hit


def test_history_window_newest_first_clipped_with_entity_line() -> None:
    history: list[M] = []
    for i in range(8):
        history += [
            M("user", f"第{i}轮问题" + "问" * 300),
            M("assistant", f"第{i}轮回答" + "答" * 300),
        ]
    history += PLANS
    text = build_history_text(history)
    lines = text.splitlines()
    assert lines[0].startswith("[倒数第1轮] 用户: 我们在评估A方案和B方案")
    assert sum(1 for ln in lines if "用户:" in ln) == 6  # last 6 turns
    assert "第2轮问题" not in text and "第3轮问题" in text  # turns 3..7 + PLANS
    user_line = next(ln for ln in lines if "第7轮问题" in ln)
    answer_line = next(ln for ln in lines if "第7轮回答" in ln)
    assert len(user_line.split("用户: ", 1)[1]) == 200 + 2  # 200 chars + "……"
    assert len(answer_line.split("助手: ", 1)[1]) == 100 + 2
    assert lines[-1] == "对话中提到的关键实体：A方案、B方案"


def test_entities_names_first() -> None:
    assert extract_entities(ZHANG)[:3] == ["张三", "今年", "第一季度"]
    ents = extract_entities(HUAWEI)
    assert ents[0] == "华为" and "P60系列" in ents


async def test_disambiguate_strategy_uses_seed_000_prompt() -> None:
    q = "他最喜欢的食物是什么?"
    llm = FakeLLM({q: "张三最喜欢的食物是什么?"})
    history = [M("user", "我有一个朋友，张三"), M("assistant", "好的。")]
    result = await Rewriter("disambiguate", llm).rewrite(q, history)
    prompt_id, variables = llm.calls[0]
    assert prompt_id == "rewrite/disambiguate_zh" and set(variables) == {"chat_history", "input"}
    assert "用户: 我有一个朋友，张三" in variables["chat_history"]
    assert result.strategy == "disambiguate" and result.called_llm
    assert result.rewritten == "张三最喜欢的食物是什么?" and not result.reverted


async def test_rewrite_off() -> None:
    result = await Rewriter("off", FakeLLM()).rewrite("净利润呢？", ZHANG)
    assert result.rewritten == "净利润呢？" and result.strategy == "off"


def test_offline_english_baseline() -> None:
    history = [M("user", "Tell me about Project Apollo."), M("assistant", "It launched in May.")]
    assert offline_rewrite("When did it finish?", history) == "When did Project Apollo finish?"
    assert offline_rewrite("What about the budget?", history) == (
        "What about the budget (Project Apollo)?"
    )
    assert offline_rewrite("Is that policy new?", history) == "Is that policy new?"
