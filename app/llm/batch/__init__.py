"""Provider batch APIs behind the engine: Anthropic Message Batches and OpenAI Batch.

``rag eval run --batch`` gives the engine a :class:`Batcher`. A call that misses the response
cache is then not sent on its own: it joins a batch for its endpoint and model, the batch is
submitted when no new call has arrived for ``flush_idle_s`` (or it is full), polled with
back-off, and its results resolve the waiting calls and land in the same response cache —
so the pipeline, the judges and the runner are unchanged, a call is paid once, and a rerun
hits the cache. Batch ids and their calls' cache keys are kept in ``batches.sqlite3`` beside
the cache: a process restarted while a batch runs (``--resume``) re-attaches its calls to that
batch instead of submitting them again. Batch prices (``[batch_discount]`` in
``prices.toml``) are what a batch call costs.

Per-request failures in a batch (an errored request, an expired batch, a cancelled one) are
that call's :class:`~app.errors.ProviderError`, recorded on its case like any other.
"""

from __future__ import annotations

from app.llm.batch.batcher import BatchConfig, Batcher

__all__ = ["BatchConfig", "Batcher"]
