"""Live checks against the real providers. Marked ``live``: `make test` deselects them, and
they skip without the key. Run them with e.g. ``ANTHROPIC_API_KEY=… pytest -m live``.

They cost a few cents: one short completion per provider, the fixtures of ``system/kb_qa``
and a three-case smoke run judged by a stronger model.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.llm.engine import Engine, EngineConfig
from app.llm.types import ChatRequest, Completion, Message

pytestmark = pytest.mark.live

PROVIDERS = {
    "anthropic": ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-6", "anthropic:claude-opus-4-7"),
    "openai": ("OPENAI_API_KEY", "openai:gpt-4o-mini", "openai:gpt-4o"),
}


def _need(env: str) -> None:
    if not os.environ.get(env):
        pytest.skip(f"{env} is not set")


@pytest.mark.parametrize("family", sorted(PROVIDERS))
def test_one_completion_with_usage_and_cost(family: str, tmp_path: Path) -> None:
    env, model, _ = PROVIDERS[family]
    _need(env)

    async def call() -> Completion:
        engine = Engine(EngineConfig(cache=False, cache_path=tmp_path / "c.sqlite3"))
        try:
            request = ChatRequest(
                model=model.split(":", 1)[1],
                system="Answer with one word.",
                messages=(Message("user", "What is the capital of France?"),),
                max_tokens=16,
            )
            return await engine.generate(model, request)
        finally:
            await engine.aclose()

    completion = asyncio.run(call())
    assert "paris" in completion.text.lower()
    assert completion.usage.input_tokens > 0
    assert completion.request_id
    assert completion.cost_usd is not None and completion.cost_usd > 0


@pytest.mark.parametrize("family", sorted(PROVIDERS))
def test_smoke_run_on_real_models(family: str, tmp_path: Path) -> None:
    env, model, judge = PROVIDERS[family]
    _need(env)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "app", "eval", "run", "--suite", "smoke", "--limit", "3",
         "--model", model, "--judge", judge, "--quiet", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "RAG_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(next(out.glob("eval_*.json")).read_text(encoding="utf-8"))
    assert report["meta"]["candidate"]["offline"] is False
    assert report["totals"]["judge_errors"] == 0
    assert all(c["metrics"]["faithfulness"]["value"] is not None for c in report["cases"])
