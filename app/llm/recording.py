"""Recording the calls a piece of work makes through the engine, for
:meth:`app.llm.engine.Engine.replay` (the pipeline-level warm cache, :mod:`app.eval.run.warm`).

A record is ``(cache key, digest of the stored completion)`` per call, or ``None`` for a call
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

__all__ = [
    "CallRecord",
    "completion_digest",
    "invalid_text",
    "note_invalid_text",
    "record_call",
    "recording",
]

#: one call of a recorded piece of work: (cache key, :func:`completion_digest`), or
#: None for a call that did not go through the response cache (not replayable)
CallRecord = tuple[str, str] | None
_RECORDING: ContextVar[list[CallRecord] | None] = ContextVar("engine_recording", default=None)
_INVALID_TEXT: ContextVar[list[str] | None] = ContextVar("engine_invalid_text", default=None)


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
    """sha256 of the stored completion without what tells how the call went rather than what
    it answered (``latency_s``, ``request_id``, ``cached``; no answer reads them): a
    ``--refresh-cache`` that stores the same reply again keeps a recorded piece of work
    replayable, and whether it does never depends on how long the new call took (it did, to
    the microsecond: a replay that came and went between two runs of the same work)."""
    blob = encode_completion(replace(completion, cached=False, latency_s=0.0, request_id=None))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def record_call(key: str | None, completion: Completion) -> None:
    calls = _RECORDING.get()
    if calls is not None:
        calls.append(None if key is None else (key, completion_digest(completion)))


@contextmanager
def invalid_text() -> Iterator[list[str]]:
    """Collect, for the calls made by the current task (and the tasks it starts) in this
    block, one sentence per call whose reply carried text that was not valid Unicode (lone
    surrogates replaced by U+FFFD at the provider boundary, :mod:`app.wellformed`): which
    call, which provider, which request, how many characters. A report lists them per case."""
    notes: list[str] = []
    token = _INVALID_TEXT.set(notes)
    try:
        yield notes
    finally:
        _INVALID_TEXT.reset(token)


def note_invalid_text(completion: Completion, purpose: str, prompt_version: str | None) -> None:
    """Note ``completion`` (``repaired > 0``) in the :func:`invalid_text` block, if any."""
    notes = _INVALID_TEXT.get()
    if notes is None:
        return
    what = f"{purpose} call" + (f" ({prompt_version})" if prompt_version else "")
    rid = f", request id {completion.request_id}" if completion.request_id else ""
    cached = ", from the cache" if completion.cached else ""
    notes.append(
        f"{what} to {completion.provider}:{completion.model}{rid}{cached}: "
        f"{completion.repaired} lone surrogate(s) in the reply (not valid Unicode) "
        "replaced by U+FFFD"
    )
