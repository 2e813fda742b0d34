"""Retry budget that grows with the run, 429s as flow control, adaptive concurrency.

Issue 12: the run-wide retry budget was a fixed 100 and was gone after 623 of 5,000
requests, so 77 % of the cases of a nightly against a rate-limiting server ended with errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from app.errors import ProviderError
from app.llm.engine import Engine
from app.llm.limits import AdaptiveLimit
from app.llm.retry import RetryBudget
from tests.support.fake_llm_server import Action, FakeLLMServer, rate_limited, server_error
from tests.unit.llm.helpers import chat

pytestmark = pytest.mark.usefixtures("planted_keys")

EngineFactory = Callable[..., Engine]


def first_try_of_every_other_call_fails() -> Callable[[int, Any], Action | None]:
    """A 500 for the first attempt of the calls asking ``q<even>``; retries go through."""
    seen: set[str] = set()

    def choose(number: int, body: Any) -> Action | None:
        text = body["messages"][-1]["content"]
        if int(text[1:]) % 2 or text in seen:
            return None
        seen.add(text)
        return server_error(500)

    return choose


# -- the run-wide budget -------------------------------------------------------------------


def test_budget_grows_with_the_requests_and_is_capped() -> None:
    budget = RetryBudget(None, ratio=0.5, floor=2)
    assert budget.allowed == 2
    for _ in range(10):
        budget.request()
    assert budget.allowed == 2 + 5  # floor + ratio × requests
    assert [budget.take() for _ in range(8)] == [True] * 7 + [False]
    assert (budget.used, budget.refused) == (7, 1)
    capped = RetryBudget(3, ratio=0.5, floor=100)
    for _ in range(1000):
        capped.request()
    assert capped.allowed == 3


async def test_a_long_run_is_not_starved_by_a_fixed_budget(
    engine_factory: EngineFactory,
) -> None:
    """300 calls, half of them failing once: 150 retries, more than the old budget."""
    with FakeLLMServer(chooser=first_try_of_every_other_call_fails()) as server:
        engine = engine_factory(cache=False, concurrency=8)
        provider = f"openai:gpt-4o-mini@{server.openai_base_url}"
        results = await asyncio.gather(
            *(engine.generate(provider, chat(f"q{i}")) for i in range(300)),
            return_exceptions=True,
        )
    failed = [r for r in results if isinstance(r, BaseException)]
    assert failed == []
    assert engine.stats.retries == 150  # the old fixed budget was 100
    budget = engine.stats.as_dict()["retry_budget"]
    assert budget["requests"] == 300 and budget["used"] == engine.stats.retries
    assert budget["allowed"] == 100 + 150 and budget["refused"] == 0


async def test_retry_budget_cap_stops_a_dead_endpoint(engine_factory: EngineFactory) -> None:
    with FakeLLMServer(chooser=lambda n, body: server_error(503)) as server:
        engine = engine_factory(cache=False, retry_budget=5, max_attempts=4)
        provider = f"openai:gpt-4o-mini@{server.openai_base_url}"
        results = await asyncio.gather(
            *(engine.generate(provider, chat(f"q{i}")) for i in range(10)),
            return_exceptions=True,
        )
        requests = server.requests
    assert all(isinstance(r, ProviderError) for r in results)
    assert engine.stats.retries == 5 and requests == 10 + 5
    messages = [str(r) for r in results]
    assert sum("--retry-budget" in m for m in messages) >= 1


# -- 429 is flow control -------------------------------------------------------------------


async def test_429s_do_not_use_up_the_failed_attempts(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(*[rate_limited(0.01)] * 5, server_error(500), "through")
    engine = engine_factory(cache=False, max_attempts=2)
    completion = await engine.generate(
        f"openai:gpt-4o-mini@{fake_llm_server.openai_base_url}", chat()
    )
    assert completion.text == "through"
    assert engine.stats.throttled == 5 and engine.stats.retries == 6


async def test_a_call_gives_up_after_max_throttled_429s(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(*[rate_limited(0.01)] * 4, "never reached")
    engine = engine_factory(cache=False, max_throttled=3)
    with pytest.raises(ProviderError) as info:
        await engine.generate(f"openai:gpt-4o-mini@{fake_llm_server.openai_base_url}", chat())
    assert info.value.status == 429
    assert fake_llm_server.requests == 4  # first try + 3 waited-out 429s


# -- adaptive concurrency ------------------------------------------------------------------


def test_adaptive_limit_halves_on_a_storm_and_recovers_one_by_one() -> None:
    limit = AdaptiveLimit(16, window=20, min_samples=10, storm_share=0.25)
    for _ in range(15):
        limit.on_throttled()
    assert limit.limit == 16  # fewer replies seen than slots in use: no decision yet
    limit.on_throttled()
    assert limit.limit == 8 and limit.decreases == 1
    for _ in range(9):
        limit.on_throttled()
    assert limit.limit == 8  # the new limit is judged on fresh replies (10 = min_samples)
    limit.on_throttled()
    assert limit.limit == 4
    # recovery: +1 per `limit` successes, up to the ceiling and never above it
    for _ in range(4):
        limit.on_reply(ok=True)
    assert limit.limit == 5
    for _ in range(1000):
        limit.on_reply(ok=True)
    assert limit.limit == 16 and limit.min_limit == 4
    record = limit.as_dict()
    assert record["decreases"] == 2 and record["increases"] == 12
    assert [e["limit"] for e in record["events"][:3]] == [8, 4, 5]


def test_scattered_429s_are_not_a_storm() -> None:
    limit = AdaptiveLimit(16)
    for i in range(2000):  # a steady 10 %: one 429 in every ten replies
        if i % 10 == 0:
            limit.on_throttled()
        else:
            limit.on_reply(ok=True)
    assert limit.limit == 16 and limit.decreases == 0 and limit.throttled == 200


def test_storm_decreases_wait_for_the_cooldown() -> None:
    limit = AdaptiveLimit(16, window=20, min_samples=10, cooldown_s=3600.0)
    for _ in range(100):
        limit.on_throttled()
    assert limit.limit == 8 and limit.decreases == 1


async def test_adaptive_limit_bounds_the_slots_it_hands_out() -> None:
    limit = AdaptiveLimit(4, min_samples=1, window=4)
    peak = 0

    async def user() -> None:
        nonlocal peak
        await limit.acquire()
        peak = max(peak, limit.in_use)
        await asyncio.sleep(0.01)
        limit.release()

    await asyncio.gather(*(user() for _ in range(20)))
    assert peak == 4
    for _ in range(4):
        limit.on_throttled()
    assert limit.limit == 2
    peak = 0
    await asyncio.gather(*(user() for _ in range(20)))
    assert peak == 2 and limit.in_use == 0


async def _overload_run(engine: Engine, calls: int) -> tuple[int, int, list[Any]]:
    with FakeLLMServer(latency_s=0.1, capacity=3, capacity_retry_after=0.05) as server:
        provider = f"openai:gpt-4o-mini@{server.openai_base_url}"
        results = await asyncio.gather(
            *(engine.generate(provider, chat(f"q{i}")) for i in range(calls)),
            return_exceptions=True,
        )
        return server.peak_in_flight, server.overload_429s, list(results)


async def test_concurrency_adapts_to_an_overloaded_server_and_is_reported(
    engine_factory: EngineFactory,
) -> None:
    """A server that takes 3 requests at once answers 429 beyond that. With adaptation the
    engine backs off from 12 in flight, records it, and gets far fewer 429s than the same
    engine with a fixed limit; it never goes above --concurrency."""
    settings: dict[str, Any] = {
        "cache": False,
        "concurrency": 12,
        "max_throttled": 500,
        "retry_budget_ratio": 100.0,
    }
    adaptive = engine_factory(**settings)
    peak, overload, results = await _overload_run(adaptive, 60)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert peak <= 12
    (adapted,) = adaptive.stats.as_dict()["concurrency"].values()
    assert adapted["ceiling"] == 12 and adapted["decreases"] >= 1
    assert adapted["min"] <= 3 and adapted["events"][0]["why"].startswith("throttled")
    assert all(1 <= e["limit"] <= 12 for e in adapted["events"])
    assert adapted["throttled_replies"] == adaptive.stats.throttled == overload

    fixed = engine_factory(**settings, adaptive_concurrency=False)
    _, overload_fixed, results = await _overload_run(fixed, 60)
    assert [r for r in results if isinstance(r, BaseException)] == []
    (record,) = fixed.stats.as_dict()["concurrency"].values()
    assert record["decreases"] == 0 and record["final"] == 12
    assert overload * 2 < overload_fixed, (overload, overload_fixed)
