"""Read an answer log (``logs/answers.jsonl``): answer records and feedback records, typed.

The pipeline writes one ``"event": "answer"`` line per answer (``app.generation.pipeline
.generator``; the records are typed on the writer's side, :mod:`app.generation.pipeline
.answer_log`, and read back here as the same structs) and :func:`app.generation.pipeline.answer_log.record_feedback` appends
``"event": "feedback"`` lines. Older answer lines (before the log carried ``answer`` and
``history``) still load; what they lack is ``None`` and the commands that need it say so.
A line that is not a record is an input error naming file and line, never skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.errors import UserError
from app.generation.pipeline.answer_log import (  # the writer's records
    AnswerRecord,
    FeedbackRecord,
    LoggedArm,
    LoggedTurn,
    parse_ts,
)

MAX_LOG_BYTES = 512 * 1024 * 1024

__all__ = [
    "AnswerLog",
    "AnswerRecord",
    "FeedbackRecord",
    "LoggedArm",
    "LoggedTurn",
    "parse_ts",
    "read_answer_log",
]


@dataclass
class AnswerLog:
    path: Path
    answers: list[AnswerRecord] = field(default_factory=list)
    feedback: list[FeedbackRecord] = field(default_factory=list)
    other_events: int = 0  # lines of events this reader does not use (counted, not hidden)

    def by_trace(self) -> dict[str, AnswerRecord]:
        return {a.trace_id: a for a in self.answers}


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if not path.exists():
        raise UserError(f"{path}: no such answer log — the pipeline writes logs/answers.jsonl")
    if not path.is_file():
        raise UserError(f"{path}: not a regular file — give the answer log (a .jsonl file)")
    if path.stat().st_size > MAX_LOG_BYTES:
        raise UserError(
            f"{path}: larger than {MAX_LOG_BYTES // (1024 * 1024)} MiB — split it by date first"
        )
    try:
        with path.open("r", encoding="utf-8", errors="strict") as f:
            yield from enumerate(f, 1)
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 ({exc.reason}) — the answer log is UTF-8 JSONL"
        ) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(record)"
    return f"field `{loc}`: {err['msg']}"


def read_answer_log(path: Path) -> AnswerLog:
    """Every record of ``path``; a malformed line is a :class:`UserError` with its line."""
    log = AnswerLog(path=path)
    for n, line in _lines(path):
        if not line.strip():
            continue
        try:
            data: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{n}: not JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(data, dict):
            raise UserError(f"{path}:{n}: expected a JSON object, got {type(data).__name__}")
        event = data.get("event")
        try:
            if event == "answer":
                log.answers.append(AnswerRecord.model_validate(data))
            elif event == "feedback":
                log.feedback.append(FeedbackRecord.model_validate(data))
            elif isinstance(event, str):
                log.other_events += 1
            else:
                raise UserError(f"{path}:{n}: no `event` field — expected an answer log line")
        except ValidationError as exc:
            raise UserError(f"{path}:{n}: {event} record, {_first_error(exc)}") from None
    if not log.answers:
        raise UserError(f"{path}: no answer records — is this an answer log (logs/answers.jsonl)?")
    return log
