"""Retry policy: exponential backoff with full jitter, honouring ``Retry-After``.

Only failures a provider marks ``retryable`` are retried: HTTP 408/409/429/5xx, timeouts,
connection errors and unusable 200 replies (:class:`~app.errors.MalformedReply`).
400/401/403/404 fail at once. The delay
before retry ``k`` (k = 1, 2, …) is ``uniform(0, min(max_delay_s, base_delay_s·2^(k-1)))``
("full jitter"), raised to the server's ``Retry-After`` when it sends one (capped at
``max_retry_after_s``). A ``429`` is the server's flow control, not a failed attempt: it does
not use up ``max_attempts`` (each call may wait out up to ``max_throttled`` of them).
Besides the per-call limits, a :class:`RetryBudget` that grows with the run bounds the
retries of the whole run, so a dead endpoint costs seconds, not hours.

:func:`retrying` applies the policy to one call that is not a model call (a batch's submit,
status poll or result download, :mod:`app.llm.batch`): the same attempts, throttle rule and
delays as the engine's loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from app.errors import ProviderError

T = TypeVar("T")

#: replies that are the server's flow control, not a failed attempt (529: Anthropic overloaded)
THROTTLE_STATUS = frozenset({429, 529})

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4  # failed attempts per call (first try + 3 retries); 429s excluded
    max_throttled: int = 8  # 429 replies a call waits out before it gives up
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 120.0

    def delay(self, retry_number: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to sleep before retry ``retry_number`` (1-based)."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (retry_number - 1)))
        wait = rng.uniform(0.0, cap)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after_s))
        return wait


class RetryBudget:
    """The retries a whole run may make: a share of its requests, optionally capped.

    Allowed retries = ``floor + ratio × first attempts so far``, at most ``cap`` (``None``: no
    cap) — Finagle's ``RetryBudget`` idea: the allowance grows with the run, so a
    1,000-case nightly gets as many retries per request as a 10-case smoke run (the old
    fixed 100 were gone after 623 of 5,000 requests), while a dead endpoint still costs at
    most ``ratio`` extra requests per request instead of ``max_attempts − 1``.
    """

    def __init__(self, cap: int | None = None, *, ratio: float = 0.5, floor: int = 100) -> None:
        self.cap = cap
        self.ratio = ratio
        self.floor = floor
        self.requests = 0  # first attempts
        self.used = 0
        self.refused = 0

    @property
    def allowed(self) -> int:
        grown = self.floor + int(self.ratio * self.requests)
        return grown if self.cap is None else min(self.cap, grown)

    @property
    def total(self) -> int:  # the allowance so far (kept for messages)
        return self.allowed

    def request(self) -> None:
        """Count one first attempt (each one earns ``ratio`` retries)."""
        self.requests += 1

    def take(self) -> bool:
        if self.used >= self.allowed:
            self.refused += 1
            return False
        self.used += 1
        return True

    @property
    def exhausted(self) -> bool:
        return self.used >= self.allowed

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "cap": self.cap,
            "ratio": self.ratio,
            "floor": self.floor,
            "requests": self.requests,
            "allowed": self.allowed,
            "used": self.used,
            "refused": self.refused,
        }


async def retrying(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    rng: random.Random,
    *,
    what: str,
) -> T:
    """``await call()``, retried under ``policy`` while it raises a retryable
    :class:`~app.errors.ProviderError` (a ``429``/``529`` counts against ``max_throttled``,
    anything else against ``max_attempts``); the last error is raised as it is."""
    failures = throttled = 0
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except ProviderError as exc:
            if exc.status in THROTTLE_STATUS:
                throttled += 1
                spent = throttled > policy.max_throttled
            else:
                failures += 1
                spent = failures >= policy.max_attempts
            if not exc.retryable or spent:
                raise
            delay = policy.delay(attempt, exc.retry_after, rng)
            log.info("retrying %s in %.2fs (attempt %d): %s", what, delay, attempt + 1, exc)
            await asyncio.sleep(delay)
