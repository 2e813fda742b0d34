"""Concurrency and rate limits applied around every provider call.

* a global semaphore (``EngineConfig.concurrency``) and one per endpoint
  (``per_provider_concurrency``, default: the global value);
* optional requests-per-minute and tokens-per-minute limits per endpoint, as sliding
  60-second windows. Tokens are estimated before the call (input characters / 3) and
  the window is corrected with the real usage (input + output) afterwards.

A slot is held only while a request is in flight, never during a retry back-off.

The per-endpoint limit is **adaptive** (:class:`AdaptiveLimit`, AIMD as in TCP congestion
control): a throttling storm — at least ``storm_share`` of the endpoint's last ``window``
replies were 429/529 — halves it (at most once per ``cooldown_s``); successes raise it by one
per ``limit`` successes, back up to the configured ceiling and never above it. Scattered
429s (a steady 10 %) do not make a storm. Each change is recorded (:meth:`Limiter.adaptation`,
stored in the report's ``totals.engine.concurrency``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

MAX_EVENTS = 200  # changes kept per endpoint in the report (the counters count them all)


class SlidingWindow:
    """At most ``limit`` units per ``period_s`` seconds."""

    def __init__(self, limit: float, period_s: float = 60.0) -> None:
        self.limit = limit
        self.period_s = period_s
        self._events: collections.deque[list[float]] = collections.deque()
        self._used = 0.0
        self._lock = asyncio.Lock()

    def _expire(self, now: float) -> None:
        while self._events and self._events[0][0] <= now - self.period_s:
            self._used -= self._events.popleft()[1]

    async def acquire(self, amount: float) -> list[float]:
        """Wait until ``amount`` fits; return the event so it can be corrected later."""
        amount = min(amount, self.limit)  # one oversized request may still pass alone
        async with self._lock:
            while True:
                now = time.monotonic()
                self._expire(now)
                if self._used + amount <= self.limit:
                    event = [now, amount]
                    self._events.append(event)
                    self._used += amount
                    return event
                await asyncio.sleep(max(0.01, self._events[0][0] + self.period_s - now))

    def correct(self, event: list[float], actual: float) -> None:
        if event in self._events:
            self._used += actual - event[1]
            event[1] = actual


class AdaptiveLimit:
    """A semaphore whose size moves between 1 and ``ceiling`` (see the module docstring)."""

    def __init__(
        self,
        ceiling: int,
        *,
        window: int = 50,
        min_samples: int = 10,
        storm_share: float = 0.25,
        cooldown_s: float = 0.0,
        adaptive: bool = True,
    ) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.in_use = 0
        self.window = window
        self.min_samples = min_samples
        self.storm_share = storm_share
        self.cooldown_s = cooldown_s
        self.adaptive = adaptive
        self._recent: collections.deque[bool] = collections.deque(maxlen=window)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._successes = 0
        self._last_decrease = float("-inf")
        self._started = time.monotonic()
        self.min_limit = ceiling
        self.decreases = 0
        self.increases = 0
        self.throttled = 0
        self.events: list[dict[str, Any]] = []

    async def acquire(self) -> None:
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted and cancelled at once: give the slot back
            else:
                self._waiters.remove(future)
            raise

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_use < self.limit:
            future = self._waiters.popleft()
            if not future.done():
                self.in_use += 1
                future.set_result(None)

    def _record(self, why: str) -> None:
        if len(self.events) < MAX_EVENTS:
            at = round(time.monotonic() - self._started, 3)
            self.events.append({"t_s": at, "limit": self.limit, "why": why})

    def on_throttled(self, retry_after: float | None = None) -> None:
        """A 429/529 from this endpoint: halve the limit if it is a storm."""
        self.throttled += 1
        self._recent.append(True)
        self._successes = 0
        share = sum(self._recent) / len(self._recent)
        now = time.monotonic()
        cooldown = max(self.cooldown_s, min(retry_after or 0.0, 10.0) / 2)
        if (
            self.adaptive
            and self.limit > 1
            and len(self._recent) >= max(self.min_samples, self.limit)
            and share >= self.storm_share
            and now - self._last_decrease >= cooldown
        ):
            self.limit = max(1, self.limit // 2)
            self.min_limit = min(self.min_limit, self.limit)
            self.decreases += 1
            self._last_decrease = now
            self._recent.clear()  # judge the new limit on fresh replies
            self._record(f"throttled: {share:.0%} of recent replies were 429")

    def on_reply(self, ok: bool) -> None:
        """Any other reply (``ok``: a completion): additive recovery towards the ceiling."""
        self._recent.append(False)
        if not ok or self.limit >= self.ceiling:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            self.limit += 1
            self.increases += 1
            self._record("recovering")
            self._wake()

    def as_dict(self) -> dict[str, Any]:
        return {
            "ceiling": self.ceiling,
            "final": self.limit,
            "min": self.min_limit,
            "decreases": self.decreases,
            "increases": self.increases,
            "throttled_replies": self.throttled,
            "events": list(self.events),
        }


class Limiter:
    """Global + adaptive per-endpoint concurrency, plus optional rpm/tpm per endpoint."""

    def __init__(
        self,
        concurrency: int,
        per_provider: int | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        adaptive: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._global = asyncio.Semaphore(concurrency)
        self._per_provider_n = per_provider or concurrency
        self._adaptive = adaptive
        self._per: dict[str, AdaptiveLimit] = {}
        self._rpm_limit = rpm
        self._tpm_limit = tpm
        self._rpm: dict[str, SlidingWindow] = {}
        self._tpm: dict[str, SlidingWindow] = {}

    @property
    def rate_limited(self) -> bool:
        """True when an rpm or tpm limit applies (a slot may then wait for the window)."""
        return bool(self._rpm_limit or self._tpm_limit)

    def free(self, endpoint: str) -> bool:
        """True when :meth:`slot` for ``endpoint`` would be granted now without waiting:
        no rate limit, a free global slot and a free endpoint slot nobody queues for."""
        if self._rpm_limit or self._tpm_limit or self._global.locked():
            return False
        sem = self._per.get(endpoint)
        return sem is None or (sem.in_use < sem.limit and not sem._waiters)

    def _sem(self, endpoint: str) -> AdaptiveLimit:
        sem = self._per.get(endpoint)
        if sem is None:
            sem = self._per[endpoint] = AdaptiveLimit(self._per_provider_n, adaptive=self._adaptive)
        return sem

    def throttled(self, endpoint: str, retry_after: float | None = None) -> None:
        self._sem(endpoint).on_throttled(retry_after)

    def replied(self, endpoint: str, ok: bool) -> None:
        self._sem(endpoint).on_reply(ok)

    def adaptation(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: ceiling, final and lowest limit, changes (for the report)."""
        return {endpoint: sem.as_dict() for endpoint, sem in sorted(self._per.items())}

    @asynccontextmanager
    async def slot(self, endpoint: str, est_tokens: int) -> AsyncIterator[list[float] | None]:
        """Hold a concurrency slot (and rate budget); yields the tpm event to correct."""
        if self._rpm_limit:
            window = self._rpm.setdefault(endpoint, SlidingWindow(self._rpm_limit))
            await window.acquire(1)
        tpm_event = None
        if self._tpm_limit:
            tpm = self._tpm.setdefault(endpoint, SlidingWindow(self._tpm_limit))
            tpm_event = await tpm.acquire(est_tokens)
        sem = self._sem(endpoint)
        await sem.acquire()
        try:
            async with self._global:
                yield tpm_event
        finally:
            sem.release()

    def record_tokens(self, endpoint: str, event: list[float] | None, actual: int) -> None:
        if event is not None and endpoint in self._tpm:
            self._tpm[endpoint].correct(event, actual)
