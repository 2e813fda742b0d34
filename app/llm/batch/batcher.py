"""The batcher: turns cache-missing calls into provider batches and back into completions.

Each step against the provider — submit, status poll, result download — is retried under the
run's :class:`~app.llm.retry.RetryPolicy` (:func:`~app.llm.retry.retrying`). A batch that is
with the provider is never given up silently and never submitted twice: when its results
cannot be downloaded, when it does not end within ``deadline_s`` (``--batch-timeout``) or when
the provider stops answering its status polls for ``unreachable_s``, its calls fail with a
message saying so and the batch stays recorded as submitted, so ``--resume`` (or any later
run asking the same calls) re-attaches to it instead of paying again. Every change of a
batch's counts is reported (``progress``: the run's console, else the log).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.errors import ProviderError
from app.llm.batch.apis import BatchAPI, BatchItem, BatchStatus, api_for
from app.llm.batch.store import BatchStore
from app.llm.providers.base import Provider
from app.llm.retry import RetryPolicy, retrying
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion

log = logging.getLogger(__name__)

BATCH_FAMILIES = frozenset({"anthropic", "openai"})

#: ``--batch-timeout``'s default: both APIs end (or expire) a batch within 24 h; one more hour
#: to see it end and download its results
DEFAULT_TIMEOUT_S = 25 * 3600.0


@dataclass(frozen=True)
class BatchConfig:
    flush_idle_s: float = 2.0  # submit when no new call arrived for this long
    max_requests: int = 10_000  # per batch (Anthropic allows 100k, OpenAI 50k)
    poll_initial_s: float = 10.0
    poll_factor: float = 1.5
    poll_max_s: float = 300.0
    deadline_s: float = DEFAULT_TIMEOUT_S  # --batch-timeout: both APIs end a batch within 24 h
    unreachable_s: float = 1800.0  # status polls failing (after retries) this long: reported
    retry: RetryPolicy = field(
        default_factory=RetryPolicy
    )  # each submit / status / results request
    max_rounds: int = 2  # submissions per call: the first + one for an expired/transient item
    state_path: Path | None = None  # default: <cache dir>/llm/batches.sqlite3


@dataclass
class BatchStats:
    batches: int = 0
    requests: int = 0
    reattached: int = 0  # calls found in a batch submitted by an earlier process
    resubmitted: int = 0
    failed: int = 0
    polls: int = 0
    by_batch: dict[str, str] = field(default_factory=dict)  # id -> final state


@dataclass
class _Waiter:
    key: str
    request: ChatRequest
    model: str
    future: asyncio.Future[Completion]
    rounds: int = 0


@dataclass
class _Group:
    queue: list[_Waiter] = field(default_factory=list)
    last_add: float = 0.0
    task: asyncio.Task[None] | None = None


class Batcher:
    """Give it to :class:`app.llm.engine.Engine` (``Engine(config, batcher=…)``)."""

    def __init__(
        self,
        config: BatchConfig | None = None,
        *,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config or BatchConfig()
        self.stats = BatchStats()
        self.progress = progress  # one line per change of a batch (None: the log, INFO)
        self._rng = random.Random()
        if self.config.state_path is not None:
            path = self.config.state_path
        else:
            from app import paths

            path = paths.cache_dir() / "llm" / "batches.sqlite3"
        self.store = BatchStore(path)
        self._groups: dict[tuple[str, str], _Group] = {}
        self._waiting: dict[str, _Waiter] = {}
        self._pollers: dict[str, asyncio.Task[None]] = {}
        self._apis: dict[str, BatchAPI] = {}
        self._batch_keys: dict[str, set[str]] = {}  # batch id -> keys waited for here

    @staticmethod
    def handles(spec: ProviderSpec) -> bool:
        return spec.family in BATCH_FAMILIES

    def _api(self, spec: ProviderSpec, provider: Provider) -> BatchAPI:
        api = self._apis.get(spec.endpoint)
        if api is None:
            api = self._apis[spec.endpoint] = api_for(provider)
        return api

    async def run(
        self, spec: ProviderSpec, provider: Provider, request: ChatRequest, key: str
    ) -> Completion:
        """The completion of one call, through a batch (an earlier process's, or a new one)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(key, request, spec.model, loop.create_future())
        api = self._api(spec, provider)
        self._waiting[key] = waiter
        try:
            pending = self.store.pending(key)
            if pending is not None:  # submitted by a process that did not see its end
                self.stats.reattached += 1
                self._batch_keys.setdefault(pending.batch_id, set()).add(key)
                self._watch(pending.batch_id, api)
            else:
                self._enqueue(spec, api, waiter)
            return await waiter.future
        finally:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]

    def _enqueue(self, spec: ProviderSpec, api: BatchAPI, waiter: _Waiter) -> None:
        group = self._groups.setdefault((spec.endpoint, spec.model), _Group())
        group.queue.append(waiter)
        group.last_add = time.monotonic()
        if group.task is None or group.task.done():
            group.task = asyncio.get_running_loop().create_task(self._flusher(spec, api, group))

    async def _flusher(self, spec: ProviderSpec, api: BatchAPI, group: _Group) -> None:
        cfg = self.config
        while group.queue:
            idle = time.monotonic() - group.last_add
            if idle < cfg.flush_idle_s and len(group.queue) < cfg.max_requests:
                await asyncio.sleep(cfg.flush_idle_s - idle)
                continue
            take, group.queue = group.queue[: cfg.max_requests], group.queue[cfg.max_requests :]
            take = [w for w in take if not w.future.done()]
            if not take:
                continue
            try:
                await self._submit(spec, api, take)
            except Exception as exc:  # a defect: fail these calls, keep serving the queue
                for w in take:
                    self._fail(w, _unexpected("submit", exc, "nothing was collected"))

    async def _submit(self, spec: ProviderSpec, api: BatchAPI, take: list[_Waiter]) -> None:
        items = [BatchItem(custom_id=w.key, request=w.request, model=w.model) for w in take]
        try:
            batch_id = await retrying(
                lambda: api.submit(items), self.config.retry, self._rng, what="batch submit"
            )
        except ProviderError as exc:
            for w in take:
                self._fail(w, exc)
            return
        except Exception as exc:  # a defect or an unwrapped client error: no hang
            for w in take:
                self._fail(w, _unexpected("submit", exc, "nothing was submitted"))
            return
        for w in take:
            w.rounds += 1
        try:
            self.store.record_submitted(
                batch_id,
                family=spec.family,
                endpoint=spec.endpoint,
                model=spec.model,
                items=[(w.key, w.key) for w in take],
            )
        except Exception as exc:  # sqlite: locked, disk full, read-only …
            error = _store_error(batch_id, exc, "was submitted, but could not be recorded "
                                 "(--resume cannot re-attach to it; its results are not "
                                 "collected)")  # fmt: skip
            for w in take:
                self._fail(w, error)
            return
        self._batch_keys.setdefault(batch_id, set()).update(w.key for w in take)
        self.stats.batches += 1
        self.stats.requests += len(take)
        log.info("submitted %s batch %s with %d requests", spec, batch_id, len(take))
        self._watch(batch_id, api)

    def _watch(self, batch_id: str, api: BatchAPI) -> None:
        task = self._pollers.get(batch_id)
        if task is None or task.done():
            self._pollers[batch_id] = asyncio.get_running_loop().create_task(
                self._poll(batch_id, api)
            )

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)
        else:
            log.info("%s", line)

    async def _poll(self, batch_id: str, api: BatchAPI) -> None:
        cfg = self.config
        started = last_answer = time.monotonic()
        wait = cfg.poll_initial_s
        seen: tuple[str, tuple[tuple[str, int], ...]] | None = None
        failed_polls = 0
        try:
            while True:
                status: BatchStatus | None = None
                try:
                    status = await retrying(
                        lambda: api.status(batch_id), cfg.retry, self._rng, what="batch status"
                    )
                    self.stats.polls += 1
                    last_answer, failed_polls = time.monotonic(), 0
                except ProviderError as exc:
                    if exc.status == 404:  # the provider does not know the batch (any more)
                        self._fail_batch(batch_id, exc)
                        return
                    if not exc.retryable:  # a key or permission: the batch is still there
                        self._fail_batch(
                            batch_id, _kept(batch_id, f"status failed: {exc}"), keep=True
                        )
                        return
                    failed_polls += 1
                    silent = time.monotonic() - last_answer
                    self._say(
                        f"batch {batch_id}: no answer from the provider for {_span(silent)} "
                        f"({failed_polls} status poll(s) failed after retries; last: {exc})"
                    )
                    if silent >= cfg.unreachable_s:
                        self._fail_batch(
                            batch_id,
                            _kept(
                                batch_id,
                                f"the provider stopped answering: no status for {_span(silent)} "
                                f"({failed_polls} polls failed after retries; last error: {exc})",
                            ),
                            keep=True,
                        )
                        return
                except Exception as exc:
                    self._fail_batch(batch_id, _unexpected("status", exc, _KEPT), keep=True)
                    return
                if status is not None and status.ended:
                    break
                if (
                    status is not None
                    and (status.state, tuple(sorted(status.counts.items()))) != seen
                ):
                    seen = (status.state, tuple(sorted(status.counts.items())))
                    counts = ", ".join(f"{k} {v}" for k, v in status.counts.items())
                    self._say(
                        f"batch {batch_id}: {status.state} ({counts}) after "
                        f"{_span(time.monotonic() - started)}"
                    )
                elapsed = time.monotonic() - started
                if elapsed > cfg.deadline_s:
                    self._fail_batch(
                        batch_id,
                        _kept(
                            batch_id,
                            f"did not end within --batch-timeout {_span(cfg.deadline_s)} "
                            f"(last state: {status.state if status else 'unknown'})",
                        ),
                        keep=True,
                    )
                    return
                await asyncio.sleep(min(wait, max(cfg.deadline_s - elapsed, 0.0) + 0.001))
                wait = min(cfg.poll_max_s, wait * cfg.poll_factor)
            try:
                results = await retrying(
                    lambda: api.results(batch_id), cfg.retry, self._rng, what="batch results"
                )
            except ProviderError as exc:
                self._fail_batch(
                    batch_id, _kept(batch_id, f"its results could not be downloaded: {exc}"),
                    keep=True,
                )  # fmt: skip
                return
            except Exception as exc:
                self._fail_batch(batch_id, _unexpected("results", exc, _KEPT), keep=True)
                return
            self.stats.by_batch[batch_id] = status.state
            self._say(f"batch {batch_id}: {status.state} after {_span(time.monotonic() - started)}")
            self._deliver(batch_id, api, results)
            self.store.finish(batch_id, "ended")
        except Exception as exc:  # the batch store failed (or a defect): no call waits for ever
            error = _store_error(batch_id, exc, "its results could not be collected (the "
                                 "batch stays with the provider)")  # fmt: skip
            for key in self._batch_keys.get(batch_id, ()):
                waiter = self._waiting.get(key)
                if waiter is not None:
                    self._fail(waiter, error)
            log.warning("%s", error)
        finally:
            self._pollers.pop(batch_id, None)
            self._batch_keys.pop(batch_id, None)

    def _deliver(
        self, batch_id: str, api: BatchAPI, results: dict[str, Completion | ProviderError]
    ) -> None:
        for custom_id, key in self.store.items_of(batch_id).items():
            waiter = self._waiting.get(key)
            if waiter is None or waiter.future.done():
                continue  # nobody in this process waits for it (another case set, or done)
            result = results.get(custom_id) or ProviderError(
                f"batch {batch_id}: no result for request {custom_id[:12]}…", retryable=True
            )
            if isinstance(result, Completion):
                waiter.future.set_result(result)
            elif result.retryable and waiter.rounds < self.config.max_rounds:
                self.stats.resubmitted += 1
                spec = _spec_of(api, waiter.model)
                self._enqueue(spec, api, waiter)
            else:
                self._fail(waiter, result)

    def _fail(self, waiter: _Waiter, exc: ProviderError) -> None:
        if not waiter.future.done():
            self.stats.failed += 1
            waiter.future.set_exception(exc)

    def _fail_batch(self, batch_id: str, exc: ProviderError, *, keep: bool = False) -> None:
        for key in self.store.items_of(batch_id).values():
            waiter = self._waiting.get(key)
            if waiter is not None:
                self._fail(waiter, exc)
        if not keep:
            self.store.finish(batch_id, "failed")

    async def aclose(self) -> None:
        for task in [*self._pollers.values(), *(g.task for g in self._groups.values() if g.task)]:
            task.cancel()
        self._pollers.clear()
        self.store.close()


_KEPT = "the batch stays recorded and --resume re-attaches to it"


def _kept(batch_id: str, what: str) -> ProviderError:
    """A batch given up by this process but kept: its calls fail with this (retryable: a
    rerun or ``--resume`` re-attaches to the batch, it is never submitted again)."""
    return ProviderError(
        f"batch {batch_id} {what}; it stays recorded as submitted — `rag eval run --resume` "
        "(or any run asking the same calls) re-attaches to it and submits nothing twice",
        retryable=True,
    )


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def _unexpected(step: str, exc: Exception, then: str) -> ProviderError:
    """Anything but a ProviderError from a batch adapter: a defect or a reply it did not
    expect. It fails the calls (never leaves them waiting); the text is redacted."""
    from app.redact import redact

    what = redact(f"{type(exc).__name__}: {exc}")[:300]
    return ProviderError(f"batch {step} failed unexpectedly ({what}); {then}")


def _store_error(batch_id: str, exc: Exception, what: str) -> ProviderError:
    """The batch store (SQLite) failed around batch ``batch_id``: the calls fail with this."""
    from app.redact import redact

    cause = redact(f"{type(exc).__name__}: {exc}")[:300]
    return ProviderError(f"batch {batch_id} {what}: the batch store failed ({cause})")


def _spec_of(api: BatchAPI, model: str) -> ProviderSpec:
    provider: Provider = getattr(api, "provider")  # noqa: B009 - both adapters have one
    return ProviderSpec(family=provider.spec.family, model=model, base_url=provider.spec.base_url)


__all__ = ["DEFAULT_TIMEOUT_S", "BatchConfig", "BatchStats", "Batcher"]
