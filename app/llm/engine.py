"""The execution engine: one ``generate`` around every provider, with the middleware once.

::

    engine = Engine(EngineConfig(concurrency=8))
    completion = await engine.generate("openai:gpt-4o-mini", request, sample_index=0)

Per call, in this order: parse the provider string → cache lookup (key includes the
sample index, so ``n`` samples are ``n`` entries) → join an identical call already in
flight → claim the key across processes (:mod:`app.llm.claims`; another process calling
for it now is waited for and its entry used) → up to ``max_attempts`` failed attempts (a 429 is flow control, not a failure: up
to ``max_throttled`` of them are waited out), each holding a global + adaptive per-endpoint
slot and a ``timeout_s`` deadline, with back-off between retries (slots released while
waiting; the run's :class:`~app.llm.retry.RetryBudget` grows with its requests) →
cost from ``prices.toml`` → store in the cache (successes only) → stats.

A call that fails after its retries raises :class:`~app.errors.ProviderError` (counted in
``stats.errors``); the caller records it for that case and goes on.

An engine belongs to one event loop: create it inside the loop that uses it and
``await engine.aclose()`` (or ``async with Engine(...)``) before that loop ends.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from app.errors import MalformedReply, ProviderError
from app.llm.cache import ResponseCache, cache_key
from app.llm.claims import HEARTBEAT_S, POLL_FIRST_S, next_poll
from app.llm.engine_stats import EngineStats
from app.llm.limits import Limiter
from app.llm.pricing import cost_usd
from app.llm.providers import Provider, create_provider
from app.llm.providers.families import parse_provider
from app.llm.recording import (
    CallRecord,
    completion_digest,
    invalid_text,
    note_invalid_text,
    record_call,
    recording,
)
from app.llm.retry import THROTTLE_STATUS, RetryBudget, RetryPolicy
from app.llm.spec import ModelRef, ProviderSpec
from app.llm.types import ChatRequest, Completion
from app.redact import install_log_redaction
from app.wellformed import REPLACEMENT, scrub

if TYPE_CHECKING:
    from app.llm.batch import Batcher

log = logging.getLogger(__name__)

__all__ = ["CallRecord", "Engine", "EngineConfig", "EngineStats", "invalid_text", "recording"]


@dataclass(frozen=True)
class EngineConfig:
    """Settings of the middleware. ``cache=False`` is ``--no-cache``; ``refresh_cache``
    re-asks the provider and overwrites the stored entries (``--refresh-cache``);
    ``refresh_answers`` does so for every call but a judge's (``--fresh-answers``)."""

    concurrency: int = 8
    per_provider_concurrency: int | None = None  # default: same as ``concurrency``
    cache: bool = True
    refresh_cache: bool = False
    # refresh every call but the judge's (--fresh-answers): the candidate is asked again, a
    # judge call whose request (the answer included) is unchanged is still a hit
    refresh_answers: bool = False
    timeout_s: float = 60.0
    max_attempts: int = 4  # failed attempts per call; a 429 is not one (see max_throttled)
    max_throttled: int = 8  # 429/529 replies one call waits out before it gives up
    retry_budget: int | None = None  # cap on the run's retries (--retry-budget); None: no cap
    retry_budget_ratio: float = 0.5  # retries the run earns per request (RetryBudget)
    retry_budget_floor: int = 100  # retries allowed before any request earned some
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 120.0
    adaptive_concurrency: bool = True  # halve an endpoint's slots in a 429 storm (limits.py)
    rpm: float | None = None  # requests per minute, per endpoint
    tpm: float | None = None  # tokens per minute, per endpoint
    cache_path: Path | None = None  # default: app.paths.cache_dir() / "llm/responses.sqlite3"
    # longest wait for another process's claim on a call (claims.py); None: as long as
    # this engine's own worst case for one call (every attempt timing out, back-offs)
    claim_wait_s: float | None = None
    seed: int | None = None  # jitter RNG seed (tests)

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=max(1, self.max_attempts),
            max_throttled=max(0, self.max_throttled),
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
            max_retry_after_s=self.max_retry_after_s,
        )

    def claim_wait_limit(self) -> float:
        if self.claim_wait_s is not None:
            return self.claim_wait_s
        attempts = max(1, self.max_attempts) + max(0, self.max_throttled)
        return attempts * (self.timeout_s + max(self.max_delay_s, self.max_retry_after_s))


def _spec(provider: ModelRef | str) -> ProviderSpec:
    """The library's one adapter from a provider string; a ModelRef is taken as parsed."""
    if isinstance(provider, ModelRef):
        return provider.require_provider()
    return parse_provider(provider)


class Engine:
    """Runs provider calls with concurrency, rate limits, retries, timeouts, cache, cost."""

    def __init__(
        self, config: EngineConfig | None = None, *, batcher: Batcher | None = None
    ) -> None:
        install_log_redaction()  # SDK and engine log lines never carry a secret
        self.config = config or EngineConfig()
        self.batcher = batcher  # provider batch APIs for cache-missing calls (``--batch``)
        self.stats = EngineStats()
        self._policy = self.config.retry_policy()
        self._budget = RetryBudget(
            self.config.retry_budget,
            ratio=self.config.retry_budget_ratio,
            floor=self.config.retry_budget_floor,
        )
        self._rng = random.Random(self.config.seed)
        self._limiter: Limiter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._providers: dict[str, Provider] = {}
        self._routes: dict[ModelRef | str, _Route] = {}  # as passed -> its spec and instance
        self._cache = ResponseCache(self.config.cache_path) if self.config.cache else None
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        self._heartbeat: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Engine(concurrency={self.config.concurrency}, cache={self.config.cache})"

    @property
    def cache_path(self) -> Path | None:
        """The response cache file (None with ``--no-cache``)."""
        return self._cache.path if self._cache is not None else None

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None and not heartbeat.done():
            heartbeat.cancel()
        providers, self._providers = list(self._providers.values()), {}
        self._routes = {}
        for provider in providers:
            await provider.aclose()
        if self._cache is not None:
            self._cache.close()
        if self.batcher is not None:
            await self.batcher.aclose()

    def prepare(self, *providers: ModelRef | str) -> None:
        """Check the providers' keys now (a missing key or SDK fails before the first case;
        the SDK is imported by the first request, so an all-cached run never pays it)."""
        for provider in providers:
            self.provider(_spec(provider))

    def provider(self, spec: ProviderSpec) -> Provider:
        """The provider instance for an endpoint (created on first use)."""
        key = f"{spec.endpoint}:{spec.model}" if spec.offline else spec.endpoint
        provider = self._providers.get(key)
        if provider is None:
            provider = self._providers[key] = create_provider(spec)
        return provider

    async def generate(
        self, provider: ModelRef | str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        """One completion for ``request`` from ``provider`` (a ModelRef, or a string: _spec)."""
        if self._loop is not asyncio.get_running_loop():
            self._bind_loop()
        route = self._routes.get(provider)
        if route is None:
            spec = _spec(provider)
            route = _Route(spec, self.provider(spec))  # ConfigError (missing key) here
            self._routes[provider] = route
        spec, impl = route.spec, route.impl
        if self._cache is None or not impl.cacheable:
            done = await self._call(spec, impl, request, sample_index)
            record_call(None, done)
            if done.repaired:
                note_invalid_text(done, request.purpose, request.prompt_version)
            return done
        key = cache_key(spec, request, sample_index)
        completion = await self._cached_generate(spec, impl, request, sample_index, key)
        record_call(key, completion)
        if completion.repaired:
            note_invalid_text(completion, request.purpose, request.prompt_version)
        return completion

    def replay(self, calls: Sequence[CallRecord]) -> list[Completion] | None:
        """Stand for ``calls`` recorded earlier (:func:`recording`) when every one of them
        would be a cache hit now with the same stored completion: count them as the hits
        they would have been and return those completions; else None (nothing counted).
        Never with ``--no-cache``, ``--refresh-cache`` or ``--fresh-answers`` (the provider
        must be asked)."""
        if self._cache is None or self.config.refresh_cache or self.config.refresh_answers:
            return None
        found: list[Completion] = []
        for call in calls:
            if call is None:
                return None
            hit = self._cache.get(call[0])
            if hit is None or completion_digest(hit) != call[1]:
                return None
            found.append(hit)
        self.stats.cache_hits += len(found)
        for hit in found:
            if hit.repaired:
                note_invalid_text(hit, "replayed", None)
        return found

    async def _cached_generate(
        self,
        spec: ProviderSpec,
        impl: Provider,
        request: ChatRequest,
        sample_index: int,
        key: str,
    ) -> Completion:
        assert self._cache is not None
        refresh = self.config.refresh_cache or (
            self.config.refresh_answers and request.purpose != "judge"
        )
        if not refresh:
            hit = self._cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
        pending = self._inflight.get(key)
        if pending is not None:  # the same call is in flight: share it, never pay twice
            shared = await self._join(pending)
            if shared is not None:
                self.stats.cache_hits += 1
                return replace(shared, cached=True, sample_index=sample_index)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            stored = None if refresh else await self._claim(key)
            if stored is not None:  # another process paid for it while we waited
                self.stats.cache_hits += 1
                future.set_result(stored)
                return replace(stored, sample_index=sample_index)
            if self.batcher is not None and self.batcher.handles(spec):
                completion = await self._batched(spec, impl, request, key, sample_index)
            else:
                completion = await self._call(spec, impl, request, sample_index)
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: joiners re-raise it, nobody else needs it
            raise
        except BaseException:
            future.cancel()
            raise
        else:
            future.set_result(completion)
            self._cache.put(key, completion, spec=spec, request=request)  # releases the claim
            return completion
        finally:
            self._cache.release(key)  # failed or cancelled: let a waiting process call
            if self._inflight.get(key) is future:
                del self._inflight[key]

    async def _claim(self, key: str) -> Completion | None:
        """Claim ``key`` across processes (None: this process calls), or wait for the
        process that holds the claim and return the entry it stored. Never blocks the
        loop; bounded by the owner's liveness, the claim's expiry and ``claim_wait_s``."""
        cache = self._cache
        assert cache is not None
        delay, started = POLL_FIRST_S, time.monotonic()
        limit = self.config.claim_wait_limit()
        while not cache.claim(key):
            waited = time.monotonic() - started
            if waited >= limit:
                holder = cache.holder(key)
                log.warning(
                    "waited %.0fs for pid %s to store cache entry %s; calling myself",
                    waited,
                    holder.pid if holder else "?",
                    key[:12],
                )
                return None
            await asyncio.sleep(delay)
            delay = next_poll(delay)
            stored = cache.get(key)
            if stored is not None:
                return stored
        stored = cache.get(key)  # stored between our miss and our claim
        if stored is not None:
            cache.release(key)
            return stored
        self._keep_claims_alive()
        return None

    def _keep_claims_alive(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        """Refresh this process's claims while it holds any (a stopped or hung owner's
        claims expire, see app/llm/claims.py)."""
        cache = self._cache
        assert cache is not None
        while cache.held:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                cache.refresh_claims()
            except sqlite3.Error as exc:  # the claims then expire; waiters call themselves
                log.warning("could not refresh the cache claims: %s", exc)

    @staticmethod
    async def _join(pending: asyncio.Future[Completion]) -> Completion | None:
        """Wait for an identical call in flight; None if its caller was cancelled."""
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if pending.cancelled() and not (task is not None and task.cancelling()):
                return None
            raise

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or a new asyncio.run(): loop-bound state anew
            if self._loop is not None:
                self._providers.clear()  # their HTTP pools belong to the old loop
                self._routes.clear()
                self._inflight.clear()
                self._heartbeat = None
            self._loop = loop
            self._limiter = None

    def _get_limiter(self) -> Limiter:
        if self._limiter is None:
            self._limiter = Limiter(
                self.config.concurrency,
                self.config.per_provider_concurrency,
                self.config.rpm,
                self.config.tpm,
                adaptive=self.config.adaptive_concurrency,
            )
        return self._limiter

    async def _call(
        self, spec: ProviderSpec, impl: Provider, request: ChatRequest, sample_index: int
    ) -> Completion:
        try:
            impl.connect()  # the SDK import and client, outside the attempt's deadline
            return await self._attempts(spec, impl, request, sample_index)
        finally:
            self.stats.retry_budget = self._budget.as_dict()
            if self._limiter is not None:
                self.stats.concurrency = self._limiter.adaptation()

    async def _attempts(
        self, spec: ProviderSpec, impl: Provider, request: ChatRequest, sample_index: int
    ) -> Completion:
        limiter = self._get_limiter()
        label, endpoint, timeout_s = str(spec), spec.endpoint, self.config.timeout_s
        in_process = impl.in_process
        est_tokens = _estimate_tokens(request) if limiter.rate_limited else 0
        by_provider = self.stats.by_provider
        attempt = failures = throttled = 0
        self._budget.request()
        while True:
            attempt += 1
            try:
                if in_process and limiter.free(endpoint):
                    # every slot is free and no rate limit applies, and the call returns
                    # without awaiting: no other task runs before it is done, so holding
                    # the slots around it or a deadline (which can only fire at an await)
                    # would change nothing
                    started = time.perf_counter()
                    self.stats.calls += 1  # counted when sent, not while queued
                    by_provider[label] = by_provider.get(label, 0) + 1
                    completion = _run_in_process(
                        impl.generate(request, model=spec.model, timeout_s=timeout_s), label
                    )
                    latency = time.perf_counter() - started
                else:
                    async with limiter.slot(endpoint, est_tokens) as tpm_event:
                        started = time.perf_counter()
                        # counted when sent: a call still queued for a slot when the run
                        # stops (Ctrl-C, --max-cost) was never made
                        self.stats.calls += 1
                        by_provider[label] = by_provider.get(label, 0) + 1
                        try:
                            async with asyncio.timeout(timeout_s):
                                completion = await impl.generate(
                                    request, model=spec.model, timeout_s=timeout_s
                                )
                        except TimeoutError:
                            self.stats.timeouts += 1
                            raise ProviderError(
                                f"{spec}: no answer within {timeout_s:g}s "
                                "(EngineConfig.timeout_s / --timeout)",
                                provider=label,
                                retryable=True,
                            ) from None
                        latency = time.perf_counter() - started
                        limiter.record_tokens(endpoint, tpm_event, completion.usage.total_tokens)
                completion = wellformed(completion, label)
            except ProviderError as exc:
                if not exc.provider:
                    exc.provider = str(spec)
                is_throttle = exc.status in THROTTLE_STATUS
                if is_throttle:
                    throttled += 1
                    self.stats.throttled += 1
                    limiter.throttled(spec.endpoint, exc.retry_after)
                else:
                    failures += 1
                    limiter.replied(spec.endpoint, ok=False)
                    if isinstance(exc, MalformedReply):
                        self.stats.malformed_replies += 1
                out_of_attempts = (
                    throttled > self._policy.max_throttled
                    if is_throttle
                    else failures >= self._policy.max_attempts
                )
                if not exc.retryable or out_of_attempts:
                    self.stats.errors += 1
                    log.warning(
                        "provider call failed: %s (attempt %d, status %s, request id %s)",
                        spec,
                        attempt,
                        exc.status,
                        exc.request_id,
                    )
                    raise
                if not self._budget.take():
                    self.stats.errors += 1
                    raise ProviderError(
                        f"{spec}: retry budget of {self._budget.allowed} retries for this run "
                        f"is exhausted ({self._budget.requests} requests so far; "
                        f"--retry-budget caps it); last error: {exc}",
                        provider=str(spec),
                        request_id=exc.request_id,
                        status=exc.status,
                        retryable=False,
                    ) from exc
                delay = self._policy.delay(attempt, exc.retry_after, self._rng)
                self.stats.retries += 1
                log.info(
                    "retrying %s in %.2fs (attempt %d, %d/%d failed, %d/%d throttled, "
                    "status %s, retry-after %s)",
                    spec,
                    delay,
                    attempt + 1,
                    failures,
                    self._policy.max_attempts,
                    throttled,
                    self._policy.max_throttled,
                    exc.status,
                    exc.retry_after,
                )
                await asyncio.sleep(delay)
                continue
            limiter.replied(endpoint, ok=True)
            return self._account(spec, completion, latency, sample_index)

    async def _batched(
        self, spec: ProviderSpec, impl: Provider, request: ChatRequest, key: str, sample_index: int
    ) -> Completion:
        assert self.batcher is not None
        self.stats.calls += 1
        self.stats.by_provider[str(spec)] = self.stats.by_provider.get(str(spec), 0) + 1
        started = time.perf_counter()
        try:
            completion = wellformed(await self.batcher.run(spec, impl, request, key), str(spec))
        except ProviderError as exc:
            exc.provider = exc.provider or str(spec)
            self.stats.errors += 1
            raise
        return self._account(
            spec, completion, time.perf_counter() - started, sample_index, batch=True
        )

    def _account(
        self,
        spec: ProviderSpec,
        completion: Completion,
        latency: float,
        sample_index: int,
        *,
        batch: bool = False,
    ) -> Completion:
        usage = completion.usage
        cost = cost_usd(spec, usage, batch=batch)
        s = self.stats
        s.completions += 1
        s.input_tokens += usage.input_tokens
        s.output_tokens += usage.output_tokens
        s.cache_read_tokens += usage.cache_read_tokens
        s.cache_write_tokens += usage.cache_write_tokens
        if cost is None:
            s.unpriced_calls += 1
        else:
            s.cost_usd += cost
        if completion.repaired:
            s.invalid_text_replies += 1
        # what dataclasses.replace(completion, latency_s=…, cost_usd=…, cached=False,
        # sample_index=…) gives, without its per-field walk (once per provider call)
        return Completion(
            completion.text,
            completion.provider,
            completion.model,
            completion.finish_reason,
            usage,
            round(latency, 6),
            completion.request_id,
            cost,
            False,
            sample_index,
            completion.repaired,
        )


def wellformed(completion: Completion, label: str) -> Completion:
    """The provider boundary's text rule (:mod:`app.wellformed`): lone surrogates in the
    reply's text are replaced by U+FFFD and counted on the completion (``repaired``); a
    reply whose text is nothing but such characters is not a usable completion (a retryable
    :class:`~app.errors.MalformedReply`, like the other bad bodies)."""
    text, replaced = scrub(completion.text)
    if not replaced:
        return completion
    rid = f" (request id {completion.request_id})" if completion.request_id else ""
    if not text.replace(REPLACEMENT, "").strip():
        raise MalformedReply(
            f"{label}: unusable 200 reply{rid}: its text is {replaced} lone surrogate(s) "
            "(not valid Unicode) and nothing else",
            provider=label,
            request_id=completion.request_id,
        )
    log.info(
        "%s%s: %d lone surrogate(s) in the reply (not valid Unicode) replaced by U+FFFD",
        label,
        rid,
        replaced,
    )
    return replace(completion, text=text, repaired=completion.repaired + replaced)


@dataclass(frozen=True, slots=True)
class _Route:
    """A provider string's parse and its provider instance (the same for every call)."""

    spec: ProviderSpec
    impl: Provider


def _run_in_process(call: Coroutine[Any, Any, Completion], label: str) -> Completion:
    """Run an ``in_process`` provider's ``generate`` to its end in one step; one that
    awaits anything broke that promise and is refused (it would run without a slot and a
    deadline)."""
    try:
        call.send(None)
    except StopIteration as done:
        result: Completion = done.value
        return result
    call.close()
    raise ProviderError(
        f"{label}: the provider says in_process (generate() never awaits) but its "
        "generate() awaited; set in_process = False on its class",
        provider=label,
        retryable=False,
    )


def _estimate_tokens(request: ChatRequest) -> int:
    chars = len(request.system or "") + sum(len(m.content) for m in request.messages)
    if request.prompt_text is not None:
        chars = max(chars, len(request.prompt_text))
    return chars // 3 + 1
