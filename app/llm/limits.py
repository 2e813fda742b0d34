"""Concurrency and rate limits applied around every provider call.

* a global semaphore (``EngineConfig.concurrency``) and one per endpoint
  (``per_provider_concurrency``, default: the global value);
* optional requests-per-minute and tokens-per-minute limits per endpoint, as sliding
  60-second windows. Tokens are estimated before the call (input characters / 3) and
  the window is corrected with the real usage (input + output) afterwards.

A slot is held only while a request is in flight, never during a retry back-off.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


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


class Limiter:
    """Global + per-endpoint concurrency, plus optional rpm/tpm per endpoint."""

    def __init__(
        self,
        concurrency: int,
        per_provider: int | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._global = asyncio.Semaphore(concurrency)
        self._per_provider_n = per_provider or concurrency
        self._per: dict[str, asyncio.Semaphore] = {}
        self._rpm_limit = rpm
        self._tpm_limit = tpm
        self._rpm: dict[str, SlidingWindow] = {}
        self._tpm: dict[str, SlidingWindow] = {}

    def _sem(self, endpoint: str) -> asyncio.Semaphore:
        sem = self._per.get(endpoint)
        if sem is None:
            sem = self._per[endpoint] = asyncio.Semaphore(self._per_provider_n)
        return sem

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
        async with self._sem(endpoint), self._global:
            yield tpm_event

    def record_tokens(self, endpoint: str, event: list[float] | None, actual: int) -> None:
        if event is not None and endpoint in self._tpm:
            self._tpm[endpoint].correct(event, actual)
