"""Recording the calls a piece of work makes through the engine, for
:meth:`app.llm.engine.Engine.replay` (the pipeline-level warm cache, :mod:`app.eval.run.warm`).

A record is ``(cache key, sha256 of the stored completion)`` per call, or ``None`` for a call
that did not go through the response cache (not replayable). Recording follows the task
context: the calls of tasks started inside the block are recorded too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from app.llm.cache import encode_completion
from app.llm.types import Completion

__all__ = ["CallRecord", "completion_digest", "record_call", "recording"]

#: one call of a recorded piece of work: (cache key, sha256 of the stored completion), or
#: None for a call that did not go through the response cache (not replayable)
CallRecord = tuple[str, str] | None
_RECORDING: ContextVar[list[CallRecord] | None] = ContextVar("engine_recording", default=None)


@contextmanager
def recording() -> Iterator[list[CallRecord]]:
    """Record the calls made by the current task (and the tasks it starts) in this
    block: what :meth:`~app.llm.engine.Engine.replay` needs to stand for them later (the pipeline-level
    warm cache, :mod:`app.eval.run.warm`)."""
    calls: list[CallRecord] = []
    token = _RECORDING.set(calls)
    try:
        yield calls
    finally:
        _RECORDING.reset(token)


def completion_digest(completion: Completion) -> str:
    blob = encode_completion(replace(completion, cached=False))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def record_call(key: str | None, completion: Completion) -> None:
    calls = _RECORDING.get()
    if calls is not None:
        calls.append(None if key is None else (key, completion_digest(completion)))
