"""The engine's counters (:class:`EngineStats`): one record per run, summed over the
processes of a resumed or worker-split run. Kept apart from :mod:`app.llm.engine` so the
report code reads them without the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.llm.limits import MAX_EVENTS


@dataclass
class EngineStats:
    """Counters for the run so far. ``cost_usd`` is money spent by *this* run's calls
    (cache hits cost nothing now); ``unpriced_calls`` counts calls whose model is not in
    the price table (their cost is unknown, not zero)."""

    calls: int = 0  # provider attempts made (each retry is a call)
    completions: int = 0  # successful provider completions
    cache_hits: int = 0
    retries: int = 0
    errors: int = 0  # generate() calls that raised after their retries
    timeouts: int = 0
    throttled: int = 0  # 429/529 replies (waited out, not counted as failed attempts)
    malformed_replies: int = 0  # 200 replies that were not a usable completion
    invalid_text_replies: int = 0  # replies whose lone surrogates were replaced by U+FFFD
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    by_provider: dict[str, int] = field(default_factory=dict)
    retry_budget: dict[str, Any] = field(default_factory=dict)  # RetryBudget.as_dict()
    concurrency: dict[str, Any] = field(default_factory=dict)  # Limiter.adaptation()

    def as_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` (the same keys, order and copies) without its
        generic deep-copy walk: the runner records it after every case."""
        return {k: _plain(v) for k, v in self.__dict__.items()}

    def copy(self) -> EngineStats:
        """An independent copy (nothing shared with the live counters)."""
        return EngineStats(**self.as_dict())

    @classmethod
    def summed(cls, parts: list[EngineStats]) -> EngineStats:
        """The counters of several processes of one run (a run resumed after a kill)."""
        total = cls()
        for part in parts:
            for name in _COUNTERS:
                setattr(total, name, getattr(total, name) + getattr(part, name))
            for key, n in part.by_provider.items():
                total.by_provider[key] = total.by_provider.get(key, 0) + n
            budget = dict(total.retry_budget)
            for key, value in part.retry_budget.items():
                if key in ("requests", "used", "refused", "allowed") and isinstance(value, int):
                    budget[key] = int(budget.get(key, 0) or 0) + value
                else:
                    budget[key] = value
            total.retry_budget = budget
            for endpoint, record in part.concurrency.items():
                seen = total.concurrency.get(endpoint)
                if seen is None:
                    total.concurrency[endpoint] = dict(record)
                    continue
                merged = dict(seen)
                merged["ceiling"] = max(seen.get("ceiling", 0), record.get("ceiling", 0))
                merged["min"] = min(seen.get("min", 0), record.get("min", 0))
                merged["final"] = record.get("final")
                for key in ("decreases", "increases", "throttled_replies"):
                    merged[key] = int(seen.get(key, 0)) + int(record.get(key, 0))
                merged["events"] = [*seen.get("events", []), *record.get("events", [])][:MAX_EVENTS]
                total.concurrency[endpoint] = merged
        total.cost_usd = round(total.cost_usd, 10)
        return total


def _plain(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, tuples of plain values)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


_COUNTERS = (
    "calls",
    "completions",
    "cache_hits",
    "retries",
    "errors",
    "timeouts",
    "throttled",
    "malformed_replies",
    "invalid_text_replies",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "unpriced_calls",
)
