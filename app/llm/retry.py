"""Retry policy: exponential backoff with full jitter, honouring ``Retry-After``.

Only failures a provider marks ``retryable`` are retried: HTTP 408/409/429/5xx, timeouts,
connection errors and unusable 200 replies (:class:`~app.errors.MalformedReply`).
400/401/403/404 fail at once. The delay
before retry ``k`` (k = 1, 2, …) is ``uniform(0, min(max_delay_s, base_delay_s·2^(k-1)))``
("full jitter"), raised to the server's ``Retry-After`` when it sends one (capped at
``max_retry_after_s``). Besides ``max_attempts`` per call, a :class:`RetryBudget` bounds
the retries of a whole run, so a dead endpoint costs seconds, not hours.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4  # first try + 3 retries
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
    """A run-wide allowance of retries; ``None`` means unbounded."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.used = 0

    def take(self) -> bool:
        if self.total is not None and self.used >= self.total:
            return False
        self.used += 1
        return True

    @property
    def exhausted(self) -> bool:
        return self.total is not None and self.used >= self.total
