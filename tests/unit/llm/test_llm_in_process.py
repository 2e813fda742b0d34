"""An ``in_process`` provider (the offline baselines) runs without a slot and a deadline
when every slot is free: the same counters and completions as through the slot, a slot
still waited for when one is busy, and a provider that breaks the promise is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import asdict
from typing import ClassVar

import pytest

from app.baselines.extractive import ExtractiveProvider
from app.baselines.reference_judge import ReferenceJudgeProvider
from app.errors import ProviderError
from app.llm.engine import Engine, EngineConfig
from app.llm.providers.base import Provider
from app.llm.types import ChatRequest, Completion, Message, Usage
from tests.support.registry import registered


class _Sync(Provider):
    """Answers at once; fails (retryable) on the first ``failures`` attempts."""

    family = "offline"
    cacheable = False
    in_process = True
    failures: ClassVar[int] = 0
    seen: ClassVar[int] = 0

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        _Sync.seen += 1  # one count for the subclasses too
        if _Sync.seen <= _Sync.failures:
            raise ProviderError("flaky", retryable=True)
        return Completion(
            text=f"echo {request.messages[-1].content}",
            provider="offline",
            model="sync",  # the same for both classes
            finish_reason="stop",
            usage=Usage(input_tokens=7, output_tokens=3),
            request_id="r-1",
            cost_usd=0.0,
        )


class _SyncViaSlot(_Sync):
    in_process = False  # the same provider through the slot and the deadline


class _Awaits(_Sync):
    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        await asyncio.sleep(0)
        return await super().generate(request, model=model, timeout_s=timeout_s)


class _Slow(Provider):
    family = "offline"
    cacheable = False

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        await asyncio.sleep(0.05)
        return Completion(text="slow", provider="offline", model=model)


_SYNC: dict[str, type[Provider]] = {
    "t-sync": _Sync,
    "t-via-slot": _SyncViaSlot,
    "t-awaits": _Awaits,
}


@pytest.fixture(autouse=True)
def _providers() -> Iterator[None]:
    """The test providers registered for this module only (the tables restored after)."""
    tests = {f"offline:{name}": cls for name, cls in _SYNC.items()}
    tests["offline:t-slow-here"] = _Slow  # the offline endpoint
    tests["tslow"] = _Slow  # another endpoint: only the global slot is shared
    with registered(tests):
        yield


REQ = ChatRequest(model="m", system="s", messages=(Message("user", "hi"),))


def _stats(engine: Engine) -> dict[str, object]:
    data = asdict(engine.stats)
    data["by_provider"] = {k.split(":")[0]: v for k, v in data["by_provider"].items()}
    return data


async def _run(provider: str, *, failures: int = 0) -> tuple[list[Completion], Engine]:
    _Sync.seen = 0
    _Sync.failures = failures
    engine = Engine(EngineConfig(cache=False, concurrency=4, base_delay_s=0.0, max_delay_s=0.0))
    out = [await engine.generate(provider, REQ, sample_index=i) for i in range(3)]
    await engine.aclose()
    return out, engine


@pytest.mark.parametrize("failures", [0, 2])
async def test_same_completions_and_counters_as_through_the_slot(failures: int) -> None:
    fast, fast_engine = await _run("offline:t-sync", failures=failures)
    slow, slow_engine = await _run("offline:t-via-slot", failures=failures)
    strip = [dict(asdict(c), latency_s=0) for c in fast]
    assert strip == [dict(asdict(c), latency_s=0) for c in slow]
    assert [c.sample_index for c in fast] == [0, 1, 2]
    assert fast[0].text == "echo hi" and fast[0].cached is False and fast[0].cost_usd == 0.0
    assert _stats(fast_engine) == _stats(slow_engine)
    s = fast_engine.stats
    assert (s.calls, s.completions, s.retries, s.input_tokens) == (3 + failures, 3, failures, 21)
    assert s.by_provider == {"offline:t-sync": 3 + failures}
    assert s.retry_budget["requests"] == 3 and s.retry_budget["used"] == failures
    assert s.concurrency["offline"]["final"] == 4


@pytest.mark.parametrize("slow", ["offline:t-slow-here", "tslow:m"])
async def test_waits_for_a_busy_slot(slow: str) -> None:
    """concurrency=1 and a slow call holding the one slot (of the same endpoint, or the
    global one from another endpoint): the in-process call started meanwhile goes through
    the slot and finishes after the slow one."""
    engine = Engine(EngineConfig(cache=False, concurrency=1))
    finished: list[str] = []

    async def call(provider: str) -> None:
        done = await engine.generate(provider, REQ)
        finished.append(done.text)

    slow_call = asyncio.create_task(call(slow))
    await asyncio.sleep(0.01)  # the slow call holds the slot now
    await call("offline:t-sync")
    await slow_call
    await engine.aclose()
    assert finished == ["slow", "echo hi"]


async def test_a_provider_that_awaits_is_refused() -> None:
    engine = Engine(EngineConfig(cache=False))
    with pytest.raises(ProviderError, match=r"in_process.*awaited") as info:
        await engine.generate("offline:t-awaits", REQ)
    await engine.aclose()
    assert not info.value.retryable
    assert (engine.stats.calls, engine.stats.errors, engine.stats.completions) == (1, 1, 0)


def test_the_offline_baselines_are_in_process() -> None:
    assert ExtractiveProvider.in_process and ReferenceJudgeProvider.in_process
    assert not Provider.in_process  # an SDK provider keeps its slot and deadline
