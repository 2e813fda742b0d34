from __future__ import annotations

import asyncio
import random
import time

import pytest

from app.llm.limits import Limiter, SlidingWindow
from app.llm.pricing import cost_usd, load_prices
from app.llm.providers.base import parse_retry_after
from app.llm.providers.families import parse_provider
from app.llm.retry import RetryBudget, RetryPolicy
from app.llm.types import Usage


def test_cost_known_model_uses_all_four_rates() -> None:
    usage = Usage(
        input_tokens=1000, output_tokens=500, cache_read_tokens=2000, cache_write_tokens=400
    )
    # claude-sonnet-4-6: $3 in, $15 out, $0.30 cache read, $3.75 cache write per MTok
    expected = (1000 * 3 + 500 * 15 + 2000 * 0.30 + 400 * 3.75) / 1e6
    assert cost_usd(parse_provider("anthropic:claude-sonnet-4-6"), usage) == pytest.approx(expected)


def test_unknown_model_costs_none_and_offline_zero() -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert cost_usd(parse_provider("openai:qwen2-7b@http://127.0.0.1:9/v1"), usage) is None
    assert cost_usd(parse_provider("anthropic:claude-unknown-9"), usage) is None
    assert cost_usd(parse_provider("offline:extractive"), usage) == 0.0


def test_price_table_rows_are_complete() -> None:
    table = load_prices()
    assert ("openai", "gpt-4o-mini") in table
    for price in table.values():
        assert price.input > 0 and price.output >= price.input


def test_full_jitter_bounds_and_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random(1)
    for k, cap in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        delays = [policy.delay(k, None, rng) for _ in range(200)]
        assert min(delays) >= 0.0 and max(delays) <= cap
        assert max(delays) > cap * 0.8  # full jitter spans the whole range
    assert policy.delay(1, 3.0, rng) >= 3.0
    assert RetryPolicy(max_retry_after_s=5).delay(1, 999.0, rng) == pytest.approx(5.0)


def test_retry_budget() -> None:
    budget = RetryBudget(2)
    assert [budget.take(), budget.take(), budget.take()] == [True, True, False]
    assert budget.exhausted and budget.used == 2
    assert RetryBudget(None).take() is True


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    import email.utils

    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": when}) or 0) <= 31


async def test_sliding_window_blocks_until_the_window_moves() -> None:
    window = SlidingWindow(limit=2, period_s=0.3)
    start = time.monotonic()
    for _ in range(3):
        await window.acquire(1)
    assert time.monotonic() - start >= 0.25


async def test_limiter_caps_concurrency() -> None:
    limiter = Limiter(concurrency=3)
    active = peak = 0

    async def work() -> None:
        nonlocal active, peak
        async with limiter.slot("x", 1):
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1

    await asyncio.gather(*(work() for _ in range(20)))
    assert peak == 3
