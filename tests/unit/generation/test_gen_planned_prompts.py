"""``Pipeline.planned_prompts()``: the pipeline's own list of what it may render.

Expected lists are written from PipelineConfig's documented prompt choice (answer prompts,
rewrite by strategy and language, summary by language), not read back from the code."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.llm.types import Message as M

if TYPE_CHECKING:
    from conftest import FakeEngine

MODEL = "anthropic:claude-sonnet-4-6"


def _pipe(kb_path: Path, engine: object, **kw: object) -> Pipeline:
    return Pipeline(PipelineConfig(model=MODEL, kb_path=kb_path, log_answers=False, **kw), engine)  # type: ignore[arg-type]


def test_default_plan_answer_rewrite_and_summary_by_language(
    kb_path: Path, fake_engine: FakeEngine
) -> None:
    assert _pipe(kb_path, fake_engine).planned_prompts() == [
        ("system/kb_mode_refusal", MODEL),
        ("system/kb_qa", MODEL),
        ("rewrite/standalone", MODEL),
        ("summary/summarize_zh", MODEL),
        ("summary/summarize_en", MODEL),
    ]


def test_plan_follows_the_configuration(kb_path: Path, fake_engine: FakeEngine) -> None:
    pipe = _pipe(
        kb_path,
        fake_engine,
        mode_prompts=True,
        rewrite="disambiguate",
        rewrite_model="openai:gpt-4o",
        summary_model="openai:gpt-4o-mini",
    )
    assert pipe.planned_prompts() == [
        ("system/kb_mode_refusal", MODEL),
        ("system/kb_mode_strict", MODEL),
        ("system/kb_mode_assisted", MODEL),
        ("rewrite/disambiguate_zh", "openai:gpt-4o"),
        ("rewrite/disambiguate_en", "openai:gpt-4o"),
        ("summary/summarize_zh", "openai:gpt-4o-mini"),
        ("summary/summarize_en", "openai:gpt-4o-mini"),
    ]
    assert pipe.planned_prompts(languages=["en"])[3:] == [
        ("rewrite/disambiguate_en", "openai:gpt-4o"),
        ("summary/summarize_en", "openai:gpt-4o-mini"),
    ]
    # no history: no rewrite and no summary can run
    assert pipe.planned_prompts(history_possible=False) == pipe.planned_prompts()[:3]
    off = _pipe(kb_path, fake_engine, rewrite="off", summary_prompt="summary/summarize_en_v1")
    assert off.planned_prompts() == [
        ("system/kb_mode_refusal", MODEL),
        ("system/kb_qa", MODEL),
        ("summary/summarize_en_v1", MODEL),
    ]


@pytest.mark.parametrize("rewrite", ["standalone", "disambiguate"])
async def test_everything_the_runtime_renders_was_planned(
    kb_path: Path, fake_engine: FakeEngine, rewrite: str
) -> None:
    """Questions in both languages, with pronouns and a history long enough to be
    summarised: every prompt version the traces report is in the plan."""
    pipe = _pipe(kb_path, fake_engine, rewrite=rewrite, max_tokens=700)
    long_history = [
        M("user", "访客网络叫什么名字？" * 6),
        M("assistant", "访客网络名称为 Guest，密码每周一更新。" * 6),
        M("user", "How long is the annual leave? " * 6),
        M("assistant", "Five days a year. " * 6),
    ] * 2
    planned = {pid for pid, _ in pipe.planned_prompts()}
    seen: set[str] = set()
    for question in ("它的密码多久更新一次？", "Where do I get it?", "员工年假有几天？"):
        answer = await pipe.answer(question, long_history, ["public"])
        seen.update(answer.trace.prompt_versions.values())
    # the trace records qualified versions (…_v1); the plan names prompt ids
    used = {v.rsplit("_v", 1)[0] for v in seen}
    assert used <= planned, used - planned
    # the test did exercise all three kinds of model call
    assert {"rewrite", "summary", "generation"} <= {r.purpose for _, r in fake_engine.calls}


async def test_the_engine_is_handed_the_parsed_model(
    kb_path: Path, fake_engine: FakeEngine
) -> None:
    """The pipeline passes the config's parsed :class:`ModelRef`, not the string."""
    from app.llm.spec import ModelRef

    await _pipe(kb_path, fake_engine).answer("年假可以结转吗", [], ["public"])
    models = {r.purpose: p for p, r in fake_engine.calls}
    assert all(isinstance(p, ModelRef) for p in models.values()), models
    assert models["generation"].raw == MODEL and models["generation"].family == "anthropic"
