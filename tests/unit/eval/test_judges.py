"""Judges: parsing, one repair attempt, recorded errors, sample indexes, tier rules."""

from __future__ import annotations

import pytest

from app.errors import ConfigError, JudgeParseError
from app.eval.judges import JudgeConfig, check_judge, parse_judge, run_judge
from app.generation.registry import load_registry
from app.llm.types import ChatRequest, Completion


class ScriptedJudge:
    """Answers judge calls from a script; counts calls and records sample indexes."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[int, int]] = []  # (sample_index, n_messages)

    async def generate(
        self, provider: str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        self.calls.append((sample_index, len(request.messages)))
        assert request.temperature == 0.0
        assert request.metadata["judge_metric"] == "faithfulness"
        return Completion(text=self.replies.pop(0), provider="test", model="judge")


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
        judge, JudgeConfig("openai:gpt-4o", samples=3), "faithfulness", rendered()
    )
    assert sorted(i for i, _ in judge.calls) == [0, 1, 2]
    assert score.value == 4.0 and score.spread == 2.0 and score.samples == [4.0, 5.0, 3.0]
    assert score.n_errors == 0


async def test_one_repair_attempt_then_a_score() -> None:
    judge = ScriptedJudge(["I think it is good", '{"score": 5, "reasoning": "fixed"}'])
    score = await run_judge(
        judge, JudgeConfig("openai:gpt-4o", samples=1), "faithfulness", rendered()
    )
    assert score.value == 5.0 and score.detail["repaired"] == 1
    # the repair call carries the bad reply and the instruction: two more messages
    assert judge.calls[1][1] == judge.calls[0][1] + 2


async def test_unparseable_after_repair_is_an_error_not_a_score() -> None:
    judge = ScriptedJudge(['{"score": 4}', "nope", "still nope", '{"score": 5}'])
    score = await run_judge(
        judge, JudgeConfig("openai:gpt-4o", samples=3), "faithfulness", rendered()
    )
    assert len(judge.calls) == 4  # 3 samples + exactly one repair for the bad one
    assert score.value is None
    assert score.n_errors == 1
    assert score.reason is not None and "judge error" in score.reason
    assert score.samples is not None and None in score.samples


def test_judge_tiers() -> None:
    with pytest.raises(ConfigError, match="candidate model itself"):
        check_judge("anthropic:claude-sonnet-4-6", "anthropic:claude-sonnet-4-6")
    with pytest.raises(ConfigError, match="weaker"):
        check_judge("anthropic:claude-opus-4-7", "anthropic:claude-haiku-4-5")
    with pytest.raises(ConfigError, match="weaker"):
        check_judge("openai:gpt-4o", "openai:gpt-4o-mini")
    # an Anthropic judge always records that temperature 0 cannot be sent (API 2026-10-21)
    (only,) = check_judge("anthropic:claude-sonnet-4-6", "anthropic:claude-opus-4-7")
    assert "temperature 0 is not sent" in only
    assert check_judge("openai:gpt-4o-mini", "openai:gpt-4o") == []
    warnings = check_judge(
        "anthropic:claude-opus-4-7", "anthropic:claude-haiku-4-5", allow_weak=True
    )
    assert len(warnings) == 2 and "WEAK JUDGE" in warnings[1]
    assert "offline" in check_judge("offline:extractive", "offline:reference-judge")[0]
    assert (
        "not in JUDGE_TIERS"
        in check_judge("openai:gpt-4o", "openai:mystery-13b@http://127.0.0.1:9/v1")[0]
    )
