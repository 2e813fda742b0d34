"""An attempt the engine gives up on (timeout) closes its connection, so a one-request-at-a-
time server drops it and a retry never queues behind abandoned work."""

from __future__ import annotations

import time

import pytest

from app.errors import ProviderError
from app.llm.engine import Engine, EngineConfig
from app.llm.types import ChatRequest, Message
from tests.support.one_slot_server import OneSlotServer


def _request() -> ChatRequest:
    return ChatRequest(
        model="slow", system=None, messages=(Message(role="user", content="hi"),), max_tokens=8
    )


async def test_timed_out_attempts_are_dropped_by_the_server(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OneSlotServer(work_s=3.0) as server:
        engine = Engine(
            EngineConfig(
                timeout_s=0.5,
                max_attempts=3,
                base_delay_s=0.01,
                max_delay_s=0.02,
                cache=False,
                seed=0,
                cache_path=tmp_path / "c.sqlite3",
            )
        )
        try:
            with pytest.raises(ProviderError, match=r"no answer within 0\.5s"):
                await engine.generate(f"openai:slow@{server.base_url}", _request())
        finally:
            await engine.aclose()
        # every attempt was seen to hang up; without closing, attempt 2 and 3 would wait
        # behind 3 s of abandoned work each (and the slot would stay busy for ~9 s)
        deadline = time.monotonic() + 2.0
        while server.abandoned < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.abandoned == 3 and server.served == 0
        assert server.busy_s < 3.0
