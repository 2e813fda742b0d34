"""Pytest fixtures for the LLM layer. Import them in a conftest::

    from tests.support.fixtures import fake_llm_server, isolated_cache, planted_keys  # noqa: F401

* ``fake_llm_server`` — a started :class:`FakeLLMServer` (0 latency), stopped afterwards;
  ``ANTHROPIC_BASE_URL`` points at it so ``anthropic:<model>`` reaches it too.
* ``isolated_cache`` — ``RAG_CACHE_DIR`` set to a fresh temporary directory (returned).
* ``planted_keys`` — fake ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` values to grep for.
* ``engine_factory`` — builds :class:`Engine` objects with fast retries, closed at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.llm.engine import Engine, EngineConfig
from tests.support.fake_llm_server import FakeLLMServer

PLANTED_OPENAI_KEY = "sk-PLANTED-openai-0123456789abcdef"
PLANTED_ANTHROPIC_KEY = "sk-ant-PLANTED-anthropic-0123456789abcdef"


@pytest.fixture
def fake_llm_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        yield server


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("RAG_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def planted_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC_KEY)
    return {"OPENAI_API_KEY": PLANTED_OPENAI_KEY, "ANTHROPIC_API_KEY": PLANTED_ANTHROPIC_KEY}


@pytest.fixture
async def engine_factory(isolated_cache: Path) -> AsyncIterator[Callable[..., Engine]]:
    engines: list[Engine] = []

    def make(**overrides: Any) -> Engine:
        settings: dict[str, Any] = {
            "base_delay_s": 0.01,
            "max_delay_s": 0.05,
            "timeout_s": 5.0,
            "seed": 7,
        }
        settings.update(overrides)
        engine = Engine(EngineConfig(**settings))
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        await engine.aclose()
