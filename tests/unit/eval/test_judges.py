"""Judges: parsing, one repair attempt, recorded errors, sample indexes, tier rules."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import ClassVar

import pytest

from app.errors import ConfigError, JudgeParseError
from app.eval.scoring.judges import (
    JudgeConfig,
    check_judge,
    deterministic,
    parse_judge,
    run_judge,
    score_judge,
)
from app.eval.scoring.registry import JudgeInput
from app.eval.scoring.table import judge_table
from app.generation.registry import RenderedPrompt, load_registry
from app.llm.engine import Engine
from app.llm.providers import Provider, families, register_provider
from app.llm.providers.families import parse_model as ref
from app.llm.providers.families import parse_provider
from app.llm.spec import ModelRef
from app.llm.types import ChatRequest, Completion, Usage
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.fixtures import (  # noqa: F401
    engine_factory,
    fake_llm_server,
    isolated_cache,
    planted_keys,
)


class ScriptedJudge:
    """Answers judge calls from a script; counts calls and records sample indexes."""

    def __init__(self, replies: list[str], cost: float = 0.0) -> None:
        self.replies = list(replies)
        self.cost = cost
        self.calls: list[tuple[int, int]] = []  # (sample_index, n_messages)

    async def generate(
        self, provider: ModelRef, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        self.calls.append((sample_index, len(request.messages)))
        assert request.temperature == 0.0
        assert request.metadata["judge_metric"] == "faithfulness"
        return Completion(
            text=self.replies.pop(0), provider="test", model="judge", cost_usd=self.cost
        )


def rendered() -> object:
    return load_registry().render(
        "judge/faithfulness",
        model="openai:gpt-4o",
        variables={"context": "[1] 年假 5 天", "question": "年假几天", "candidate": "5 天 [1]"},
    )


def test_parse_judge() -> None:
    assert parse_judge('{"score": 4, "reasoning": "ok"}') == (4.0, "ok")
    assert parse_judge('```json\n{"score": "5", "reasoning": "fine"}\n```') == (5.0, "fine")
    assert parse_judge('Sure! {"score": 2}')[0] == 2.0
    for bad in (
        "4",
        '{"score": 9}',
        '{"score": null}',
        '{"reasoning": "x"}',
        "{oops}",
        '{"score": true}',
    ):
        with pytest.raises(JudgeParseError):
            parse_judge(bad)


async def test_samples_are_distinct_and_averaged() -> None:
    judge = ScriptedJudge(['{"score": 4}', '{"score": 5}', '{"score": 3}'])
    score = await run_judge(
        judge, JudgeConfig(ref("openai:gpt-4o"), samples=3), "faithfulness", rendered()
    )
    assert sorted(i for i, _ in judge.calls) == [0, 1, 2]
    assert score.value == 4.0 and score.spread == 2.0 and score.samples == [4.0, 5.0, 3.0]
    assert score.n_errors == 0


async def test_one_repair_attempt_then_a_score() -> None:
    judge = ScriptedJudge(["I think it is good", '{"score": 5, "reasoning": "fixed"}'])
    score = await run_judge(
        judge, JudgeConfig(ref("openai:gpt-4o"), samples=1), "faithfulness", rendered()
    )
    assert score.value == 5.0 and score.detail["repaired"] == 1
    # the repair call carries the bad reply and the instruction: two more messages
    assert judge.calls[1][1] == judge.calls[0][1] + 2


async def test_unparseable_after_repair_is_an_error_not_a_score() -> None:
    judge = ScriptedJudge(['{"score": 4}', "nope", "still nope", '{"score": 5}'])
    score = await run_judge(
        judge, JudgeConfig(ref("openai:gpt-4o"), samples=3), "faithfulness", rendered()
    )
    assert len(judge.calls) == 4  # 3 samples + exactly one repair for the bad one
    assert score.value is None
    assert score.n_errors == 1
    assert score.reason is not None and "judge error" in score.reason
    assert score.samples is not None and None in score.samples


def test_judge_tiers() -> None:
    with pytest.raises(ConfigError, match="candidate model itself"):
        check_judge(ref("anthropic:claude-sonnet-4-6"), ref("anthropic:claude-sonnet-4-6"))
    with pytest.raises(ConfigError, match="weaker"):
        check_judge(ref("anthropic:claude-opus-4-7"), ref("anthropic:claude-haiku-4-5"))
    with pytest.raises(ConfigError, match="weaker"):
        check_judge(ref("openai:gpt-4o"), ref("openai:gpt-4o-mini"))
    # an Anthropic judge always records that temperature 0 cannot be sent (API 2026-10-21)
    (only,) = check_judge(ref("anthropic:claude-sonnet-4-6"), ref("anthropic:claude-opus-4-7"))
    assert "temperature 0 is not sent" in only
    assert check_judge(ref("openai:gpt-4o-mini"), ref("openai:gpt-4o")) == []
    warnings = check_judge(
        ref("anthropic:claude-opus-4-7"), ref("anthropic:claude-haiku-4-5"), allow_weak=True
    )
    assert len(warnings) == 2 and "WEAK JUDGE" in warnings[1]
    assert "offline" in check_judge(ref("offline:extractive"), ref("offline:reference-judge"))[0]
    assert (
        "not in JUDGE_TIERS"
        in check_judge(ref("openai:gpt-4o"), ref("openai:mystery-13b@http://127.0.0.1:9/v1"))[0]
    )


class StubJudgeProvider(Provider):
    """A registered deterministic judge (its verdict a pure function of the request)."""

    family = "stubjudge"
    cacheable = False
    deterministic = True
    asked: ClassVar[list[tuple[str, int]]] = []

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        StubJudgeProvider.asked.append((request.metadata["judge_metric"], len(request.messages)))
        score = 2 + len(request.metadata["judge_metric"]) % 3
        return Completion(
            text=json.dumps({"score": score, "reasoning": f"rule {score}"}),
            provider="stubjudge",
            model=model,
            usage=Usage(10, 5),
        )


@pytest.fixture
def stubjudge() -> Iterator[type[StubJudgeProvider]]:
    saved = dict(families.FAMILIES)
    StubJudgeProvider.asked.clear()
    register_provider("stubjudge", StubJudgeProvider, "a deterministic test judge")
    yield StubJudgeProvider
    families.FAMILIES.clear()
    families.FAMILIES.update(saved)
    families.parse_model.cache_clear()


def test_only_the_offline_providers_are_deterministic() -> None:
    from app.llm.providers import provider_class

    assert deterministic(parse_provider("offline:reference-judge"))
    assert deterministic(parse_provider("offline:extractive"))
    for model in ("openai:gpt-4o", "anthropic:claude-opus-4-7", "local:smollm2"):
        assert not deterministic(parse_provider(model)), model
    assert provider_class(parse_provider("openai:gpt-4o")).deterministic is False
    # the report says how such a judge is asked, in one line of meta.judge.warnings
    (line,) = [
        w
        for w in check_judge(ref("offline:extractive"), ref("offline:reference-judge"))
        if "once" in w
    ]
    assert "asked once per metric and case" in line
    assert not any(
        "once" in w for w in check_judge(ref("openai:gpt-4o-mini"), ref("openai:gpt-4o"))
    )


async def test_a_deterministic_judge_is_asked_once_per_metric_and_case(
    stubjudge: type[StubJudgeProvider],
    engine_factory: Callable[..., Engine],  # noqa: F811
) -> None:
    engine = engine_factory(cache=False)
    config = JudgeConfig(ref("stubjudge:gpt-4o"), samples=3)
    inp = JudgeInput(
        question="年假几天", candidate="5 天 [1]", context="[1] 年假 5 天", golden_answer="5 天"
    )
    table = judge_table()
    registry = load_registry()

    def render(prompt_id: str, model: str, variables: Mapping[str, str]) -> RenderedPrompt:
        return registry.render(prompt_id, model=model, variables=variables)

    scores = {
        name: await score_judge(engine, config, entry, inp, render) for name, entry in table.items()
    }
    # one call per metric, not one per sample; the engine counts the calls made
    assert sorted(m for m, _ in stubjudge.asked) == sorted(table)
    assert engine.stats.calls == len(table) == engine.stats.completions
    assert engine.stats.by_provider == {"stubjudge:gpt-4o": len(table)}
    for name, score in scores.items():
        expected = float(2 + len(name) % 3)  # what the stub answers for this metric
        assert score.samples == [expected] * 3 and score.spread == 0.0
        assert score.value == expected and score.n_errors == 0
        assert score.detail["reasoning"] == [f"rule {int(expected)}"] * 3
        assert score.detail["repaired"] == 0


async def test_repeated_samples_keep_repair_errors_and_count_the_cost_once() -> None:
    # ScriptedJudge stands for the engine; the provider string names the offline judge,
    # whose class is deterministic: one sample is asked, three are reported
    judge = ScriptedJudge(["I think it is good", '{"score": 4, "reasoning": "fixed"}'], cost=0.25)
    score = await run_judge(
        judge, JudgeConfig(ref("offline:reference-judge"), samples=3), "faithfulness", rendered()
    )
    assert [i for i, _ in judge.calls] == [0, 0]  # sample 0 and its one repair
    assert score.samples == [4.0, 4.0, 4.0] and score.value == 4.0 and score.spread == 0.0
    assert score.detail["repaired"] == 3  # every sample would have needed the repair
    assert score.detail["reasoning"] == ["fixed"] * 3
    assert score.detail["cost_usd"] == 0.5  # the two calls made, once

    broken = ScriptedJudge(["nope", "still nope"])
    failed = await run_judge(
        broken, JudgeConfig(ref("offline:reference-judge"), samples=3), "faithfulness", rendered()
    )
    assert len(broken.calls) == 2
    assert failed.value is None and failed.n_errors == 3 and failed.samples == [None] * 3
    assert failed.reason is not None and failed.reason.startswith("3/3 judge sample(s) failed")

    # one sample asked: exactly one call either way
    once = ScriptedJudge(['{"score": 5}'])
    single = await run_judge(
        once, JudgeConfig(ref("offline:reference-judge"), samples=1), "faithfulness", rendered()
    )
    assert once.calls == [(0, once.calls[0][1])] and single.samples == [5.0]


async def test_an_sdk_judge_is_still_asked_once_per_sample(
    fake_llm_server: FakeLLMServer,  # noqa: F811
    planted_keys: dict[str, str],  # noqa: F811
    engine_factory: Callable[..., Engine],  # noqa: F811
) -> None:
    fake_llm_server.script('{"score": 4, "reasoning": "a"}', '{"score": 2}', '{"score": 3}')
    engine = engine_factory(cache=False)
    model = f"openai:gpt-4o@{fake_llm_server.openai_base_url}"
    assert not deterministic(parse_provider(model))
    score = await run_judge(engine, JudgeConfig(ref(model), samples=3), "faithfulness", rendered())
    assert fake_llm_server.stats()["requests"] == 3 and engine.stats.calls == 3
    assert sorted(score.samples or []) == [2.0, 3.0, 4.0] and score.spread == 2.0
    assert score.value == 3.0
