"""Read an answer log (``logs/answers.jsonl``): answer records and feedback records, typed.

The pipeline writes one ``"event": "answer"`` line per answer (``app.generation.pipeline
.generator``) and :func:`app.generation.pipeline.answer_log.record_feedback` appends
``"event": "feedback"`` lines. Older answer lines (before the log carried ``answer`` and
``history``) still load; what they lack is ``None`` and the commands that need it say so.
A line that is not a record is an input error naming file and line, never skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.errors import UserError

MAX_LOG_BYTES = 512 * 1024 * 1024
REFUSAL_MODES = frozenset({"no_hits", "refusal", "injection_refused"})


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # logs grow fields over time

    @field_validator("ts", check_fields=False)
    @classmethod
    def _iso_ts(cls, v: str) -> str:
        parse_ts(v)  # raises ValueError with the reason
        return v


class LoggedTurn(_Record):
    role: Literal["user", "assistant"]
    content: str


class AnswerRecord(_Record):
    event: Literal["answer"] = "answer"
    trace_id: str
    ts: str
    model: str
    mode: str
    question: str
    user_acl: list[str] = Field(default_factory=lambda: ["public"])
    history: list[LoggedTurn] | None = None  # None: written before the log carried it
    answer: str | None = None
    prompt_version: str | None = None
    prompt_versions: dict[str, str] = Field(default_factory=dict)
    latency_ms: float = 0.0
    top1_score: float | None = None
    retrieved_count: int | None = None
    context_chunk_ids: list[str] = Field(default_factory=list)
    citations: list[int] = Field(default_factory=list)
    cited_chunk_ids: list[str] | None = None
    invalid_citations: list[int] = Field(default_factory=list)
    rejected: bool = False
    uncertain: bool = False
    injection: str = "none"
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None

    @property
    def refused(self) -> bool:
        return self.mode in REFUSAL_MODES or self.rejected

    @property
    def cited(self) -> list[str]:
        """Cited chunk ids: logged directly, else mapped from ``[n]`` to the context."""
        if self.cited_chunk_ids is not None:
            return list(self.cited_chunk_ids)
        ids = self.context_chunk_ids
        return [ids[n - 1] for n in self.citations if 1 <= n <= len(ids)]

    @property
    def when(self) -> datetime:
        return parse_ts(self.ts)


class FeedbackRecord(_Record):
    event: Literal["feedback"] = "feedback"
    trace_id: str
    user: str = Field(min_length=1)
    rating: Literal["up", "down"]
    ts: str
    comment: str | None = None

    @property
    def when(self) -> datetime:
        return parse_ts(self.ts)


def parse_ts(ts: str) -> datetime:
    value = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


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
