"""The engine takes the parsed :class:`ModelRef` as it is: a string is read only at the
library adapter (``Engine.generate("family:model", ...)``), never for a parsed value."""

from __future__ import annotations

import pytest

from app.llm import engine as engine_mod
from app.llm.engine import Engine, EngineConfig
from app.llm.providers.families import parse_model
from app.llm.types import ChatRequest, Message


def _request() -> ChatRequest:
    return ChatRequest(
        model="extractive",
        system=None,
        messages=(Message("user", "q"),),
        metadata={"documents": '["Annual leave is five days."]', "question": "q"},
        purpose="generation",
    )


async def test_a_parsed_model_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = parse_model("offline:extractive")

    def no_parse(text: str) -> object:
        raise AssertionError(f"the engine parsed {text!r} again")

    monkeypatch.setattr(engine_mod, "parse_provider", no_parse)
    async with Engine(EngineConfig(cache=False)) as engine:
        engine.prepare(ref)
        done = await engine.generate(ref, _request())
    assert done.text and engine.stats.calls == 1


async def test_a_string_from_a_library_caller_is_parsed_once() -> None:
    async with Engine(EngineConfig(cache=False)) as engine:
        first = await engine.generate("offline:extractive", _request())
        second = await engine.generate(parse_model("offline:extractive"), _request())
    assert first.text == second.text and engine.stats.by_provider == {"offline:extractive": 2}
