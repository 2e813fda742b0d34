"""The offline baselines through the engine (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from app.errors import ConfigError
from app.llm.engine import Engine
from app.llm.providers import _text
from app.llm.providers.offline_extractive import answer
from app.llm.providers.offline_judge import band
from app.llm.types import ChatRequest, Message

EngineFactory = Callable[..., Engine]
ZH_DOCS = [
    "公司规定，员工入职满一年后每年享有15天带薪年假。年假需提前一周在OA系统申请。",
    "病假需要提供医院证明。加班可以申请调休。",
    "公司总部位于上海。",
]
EN_DOCS = [
    "Employees receive 15 days of paid annual leave after one year of service. "
    "Leave requests are filed in the HR portal one week ahead.",
    "Sick leave requires a doctor's note. The office is in Berlin.",
]


def qa(question: str, docs: list[str] | None = None, **metadata: str) -> ChatRequest:
    meta = dict(metadata)
    if docs is not None:
        meta["documents"] = json.dumps(docs, ensure_ascii=False)
    return ChatRequest(
        model="m",
        system="sys",
        messages=(Message("user", question),),
        variables={"question": question},
        metadata=meta,
    )


def judge(metric: str, **variables: str) -> ChatRequest:
    return ChatRequest(
        model="m",
        system=None,
        messages=(Message("user", "judge"),),
        purpose="judge",
        variables=variables,
        metadata={"judge_metric": metric},
    )


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("员工每年有几天年假？", "公司规定，员工入职满一年后每年享有15天带薪年假[1]。"),
        ("年假怎么申请？", "年假需提前一周在OA系统申请[1]。"),
        ("病假需要什么材料", "病假需要提供医院证明[2]。"),
        ("公司总部在哪里？", "公司总部位于上海[3]。"),
    ],
)
async def test_extractive_chinese(
    question: str, expected: str, engine_factory: EngineFactory
) -> None:
    completion = await engine_factory().generate("offline:extractive", qa(question, ZH_DOCS))
    assert completion.text == expected
    assert (completion.provider, completion.model) == ("offline", "extractive")
    assert completion.cost_usd == 0.0
    assert completion.request_id is not None and completion.request_id.startswith(
        "baseline-extractive-"
    )
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0


async def test_extractive_english_from_numbered_context(engine_factory: EngineFactory) -> None:
    context = "\n".join(f"[{i}] {d}" for i, d in enumerate(EN_DOCS, start=1))
    request = ChatRequest(
        model="m",
        system=None,
        messages=(Message("user", "..."),),
        variables={"question": "Where is the office?", "context": context},
    )
    completion = await engine_factory().generate("offline:extractive", request)
    assert completion.text == "The office is in Berlin [2]."


def test_extractive_combines_sentences_that_add_coverage() -> None:
    text, refused = answer(
        "How many days of annual leave, and where are leave requests filed?", EN_DOCS, None
    )
    assert not refused
    assert text == (
        "Leave requests are filed in the HR portal one week ahead [1]. "
        "Employees receive 15 days of paid annual leave after one year of service [1]."
    )


async def test_refusal_uses_the_prompts_wording(engine_factory: EngineFactory) -> None:
    request = qa("公司的股票代码是多少？", ZH_DOCS, rejection_answer="对不起，我无法回答这个问题。")
    completion = await engine_factory().generate("offline:extractive", request)
    assert completion.text == "对不起，我无法回答这个问题。"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("公司的股票代码是多少？", _text.DEFAULT_REFUSAL_ZH),
        ("What is the CEO's salary?", _text.DEFAULT_REFUSAL_EN),
    ],
)
def test_default_refusal_in_the_questions_language(question: str, expected: str) -> None:
    assert answer(question, ZH_DOCS + EN_DOCS, None) == (expected, True)


def test_no_documents_or_empty_question_refuses() -> None:
    assert answer("年假几天？", [], None)[1] is True
    assert answer("？", ZH_DOCS, None)[1] is True


async def test_extractive_is_deterministic_and_not_cached(engine_factory: EngineFactory) -> None:
    engine = engine_factory()
    runs = [
        await engine.generate("offline:extractive", qa("年假怎么申请？", ZH_DOCS)) for _ in range(3)
    ]
    assert len({r.text for r in runs}) == 1
    assert engine.stats.calls == 3 and engine.stats.cache_hits == 0


async def test_bad_documents_metadata_is_a_provider_error(engine_factory: EngineFactory) -> None:
    request = qa("年假？", None, documents="not json")
    with pytest.raises(Exception, match="metadata\\['documents'\\]"):
        await engine_factory().generate("offline:extractive", request)


@pytest.mark.parametrize(
    ("share", "score"), [(1.0, 5), (0.8, 5), (0.79, 4), (0.6, 4), (0.4, 3), (0.2, 2), (0.19, 1)]
)
def test_bands(share: float, score: int) -> None:
    assert band(share) == score


async def _verdict(engine: Engine, request: ChatRequest) -> dict[str, object]:
    completion = await engine.generate("offline:reference-judge", request)
    assert (completion.provider, completion.model) == ("offline", "reference-judge")
    data = json.loads(completion.text)
    assert isinstance(data, dict)
    return data


async def test_faithfulness_lists_unsupported_sentences(engine_factory: EngineFactory) -> None:
    verdict = await _verdict(
        engine_factory(),
        judge(
            "faithfulness",
            candidate="Employees receive 15 days of paid annual leave [1]. "
            "Managers receive a company car.",
            context=EN_DOCS[0],
        ),
    )
    # 10 distinct content terms; managers, company, car are not in the context: 7/10
    assert verdict["score"] == 4
    assert verdict["hallucinations"] == ["Managers receive a company car."]
    assert set(verdict) == {"score", "reasoning", "hallucinations"}


async def test_faithfulness_of_a_fully_supported_answer(engine_factory: EngineFactory) -> None:
    verdict = await _verdict(
        engine_factory(),
        judge("faithfulness", candidate="员工每年享有15天带薪年假[1]。", context=ZH_DOCS[0]),
    )
    assert verdict["score"] == 5 and verdict["hallucinations"] == []


@pytest.mark.parametrize(
    ("candidate", "golden", "score"),
    [
        ("Employees get 15 days of paid annual leave.", "15 days of paid annual leave.", 5),
        ("Employees get 10 days of paid annual leave.", "15 days of paid annual leave.", 3),
        ("Sorry, I cannot answer this question.", "15 days of paid annual leave.", 1),
        ("抱歉，根据现有资料无法回答该问题。", "抱歉，知识库中没有相关信息，无法回答。", 5),
        ("员工每年有15天年假。", "抱歉，知识库中没有相关信息，无法回答。", 1),
        ("The office is in Berlin.", "15 days of paid annual leave.", 1),
    ],
)
async def test_correctness(
    candidate: str, golden: str, score: int, engine_factory: EngineFactory
) -> None:
    verdict = await _verdict(
        engine_factory(), judge("correctness", candidate=candidate, golden_answer=golden)
    )
    assert verdict["score"] == score
    assert set(verdict) == {"score", "reasoning"}


async def test_expected_refusal_metadata_marks_the_golden_answer(
    engine_factory: EngineFactory,
) -> None:
    request = ChatRequest(
        model="m",
        system=None,
        messages=(),
        purpose="judge",
        variables={"candidate": "I don't know.", "golden_answer": "(no answer in the KB)"},
        metadata={"judge_metric": "correctness", "expected_refusal": "true"},
    )
    assert (await _verdict(engine_factory(), request))["score"] == 5


@pytest.mark.parametrize(
    ("candidate", "score"),
    [
        ("员工每年享有15天带薪年假[1]。", 5),
        ("公司总部位于上海。", 1),
        ("抱歉，根据现有资料无法回答该问题。", 3),
    ],
)
async def test_relevance(candidate: str, score: int, engine_factory: EngineFactory) -> None:
    verdict = await _verdict(
        engine_factory(), judge("relevance", candidate=candidate, question="员工每年有几天年假？")
    )
    assert verdict["score"] == score


async def test_unknown_judge_metric(engine_factory: EngineFactory) -> None:
    with pytest.raises(ConfigError, match="faithfulness, correctness, relevance"):
        await engine_factory().generate("offline:reference-judge", judge("fluency"))


def test_offline_runs_import_no_sdk_and_no_heavy_library() -> None:
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from app.llm.engine import Engine, EngineConfig\n"
        "from app.llm.types import ChatRequest, Message\n"
        "async def main():\n"
        "    async with Engine(EngineConfig(cache=False)) as e:\n"
        "        r = ChatRequest('m', None, (Message('user', 'q'),),\n"
        "                        variables={'question': 'Where is the office?',\n"
        "                                   'context': 'The office is in Berlin.'})\n"
        "        print((await e.generate('offline:extractive', r)).text)\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'pandas', 'scipy', 'httpx')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["The office is in Berlin [1].", "[]"]
