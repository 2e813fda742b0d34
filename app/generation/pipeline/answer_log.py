"""Structured answer and bad-case logs (seed 004 §1: every answer's log carries
``prompt_version``).

Records go through ordinary :mod:`logging` loggers; :func:`install` attaches a handler that
appends each record's message (already one JSON object) to a ``.jsonl`` file under
:func:`app.paths.logs_dir` — resolved at write time so ``RAG_LOG_DIR`` set by a test or a
run is honoured. Nothing secret is ever logged (no keys; only readable chunk ids).

The records are typed here, on the writer's side: :class:`AnswerRecord` is what the
generator writes (one validated record per answer) and what :mod:`app.ops.logs` reads back;
:class:`FeedbackRecord` is what :func:`record_feedback` appends. A line the writer can write,
the reader can read.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.paths import logs_dir
from app.retrieval.kb import Group, reader_groups
from app.text.refusal import REFUSAL_MODES
from app.wellformed import clean

if TYPE_CHECKING:
    from app.generation.pipeline.trace import Answer
    from app.llm.types import Message

ANSWERS_LOGGER = "app.generation.pipeline.generator"
BAD_CASES_LOGGER = "app.generation.pipeline.generator.bad_cases"


class JsonlFileHandler(logging.Handler):
    """Appends ``record.getMessage()`` as one line to ``logs_dir()/<filename>``."""

    def __init__(self, filename: str, marker: str) -> None:
        super().__init__(level=logging.INFO)
        self.filename = filename
        self.marker = marker
        self._write_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if not getattr(record, self.marker, False):
            return
        try:
            directory = logs_dir()
            directory.mkdir(parents=True, exist_ok=True)
            line = clean(record.getMessage())
            with self._write_lock, (directory / self.filename).open("a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:  # a full disk must not fail the answer; logging reports it
            self.handleError(record)


def parse_ts(ts: str) -> datetime:
    """A log time stamp (ISO 8601, ``Z`` or an offset; naive means UTC)."""
    value = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def now_ts() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Record(BaseModel):
    # logs grow fields over time; validators built at first use, not at import
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    @field_validator("ts", check_fields=False)
    @classmethod
    def _iso_ts(cls, v: str) -> str:
        parse_ts(v)  # raises ValueError with the reason
        return v


class LoggedTurn(_Record):
    role: Literal["user", "assistant"]
    content: str


class LoggedArm(_Record):
    """The arm a prompt under a staged rollout served (trace's ``ArmChoice``, as logged)."""

    arm: Literal["control", "candidate", "pinned"]
    version: str  # qualified, e.g. system/kb_qa_v3


def _public() -> list[Group]:
    return ["public"]


class AnswerRecord(_Record):
    """One ``"event": "answer"`` line. Fields an older line lacks are ``None`` (or, for
    ``refused``, derived from ``mode`` and ``rejected`` as the pipeline then did)."""

    event: Literal["answer"] = "answer"
    trace_id: str
    ts: str
    model: str
    mode: str
    question: str
    user_acl: list[Group] = Field(default_factory=_public)  # the one ACL rule (retrieval.kb)
    history: list[LoggedTurn] | None = None  # None: written before the log carried it
    answer: str | None = None
    refused: bool = False  # app.text.answer_refused, decided by the pipeline
    prompt_version: str | None = None
    prompt_hash: str | None = None
    prompt_versions: dict[str, str] = Field(default_factory=dict)
    rewritten_query: str | None = None
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
    user: str | None = None  # the user or session id the rollout arms were chosen by
    arm: Literal["control", "candidate", "pinned"] = "control"  # before arms: all control
    arms: dict[str, LoggedArm] = Field(default_factory=dict)  # prompt id -> arm and version

    def arm_of(self, prompt_id: str) -> LoggedArm | None:
        """The arm ``prompt_id`` served this answer (None: it was not under a rollout)."""
        return self.arms.get(prompt_id)

    @model_validator(mode="before")
    @classmethod
    def _refused_of_older_lines(cls, data: Any) -> Any:
        if isinstance(data, dict) and "refused" not in data:
            refused = data.get("mode") in REFUSAL_MODES or data.get("rejected") is True
            data = {**data, "refused": refused}
        return data

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


def answer_record(answer: Answer, history: Sequence[Message]) -> AnswerRecord:
    """The log record of one pipeline answer (``history``: the turns it was asked after)."""
    trace = answer.trace
    return AnswerRecord(
        trace_id=trace.trace_id,
        ts=trace.created_at,
        prompt_version=trace.prompt_version,
        prompt_hash=trace.prompt_hash,
        prompt_versions=trace.prompt_versions,
        model=trace.model,
        mode=trace.mode,
        refused=answer.refused,
        latency_ms=trace.latency_ms,
        user_acl=list(reader_groups(trace.user_acl)),
        question=trace.question,
        history=[LoggedTurn(role=m.role, content=m.content) for m in history],
        answer=answer.text,
        rewritten_query=trace.rewritten_query,
        retrieved_count=len(trace.retrieved),
        top1_score=trace.top1_score,
        context_chunk_ids=trace.context_chunk_ids,
        citations=[c.n for c in answer.citations],
        cited_chunk_ids=[c.chunk_id for c in answer.citations],
        invalid_citations=trace.invalid_citations,
        rejected=trace.rejected,
        uncertain=trace.uncertain,
        injection=trace.injection.action,
        tokens=trace.tokens.model_dump(),
        cost_usd=trace.cost_usd,
        user=trace.user,
        arm=trace.arm,
        arms={k: LoggedArm(arm=v.arm, version=v.version) for k, v in trace.arms.items()},
    )


FEEDBACK_RATINGS = ("up", "down")


class FeedbackRecord(_Record):
    event: Literal["feedback"] = "feedback"
    trace_id: str = Field(min_length=1)
    user: str = Field(min_length=1)
    rating: Literal["up", "down"]
    ts: str
    comment: str | None = None

    @property
    def when(self) -> datetime:
        return parse_ts(self.ts)


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Attach the file handlers once per process (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        answers = logging.getLogger(ANSWERS_LOGGER)
        answers.addHandler(JsonlFileHandler("answers.jsonl", "answer_log"))
        bad = logging.getLogger(BAD_CASES_LOGGER)
        bad.addHandler(JsonlFileHandler("bad_cases.jsonl", "bad_case_log"))
        for logger in (answers, bad):
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)
        _installed = True


def dumps(payload: dict[str, Any]) -> str:
    """One log line; text that is not valid Unicode is written as U+FFFD (app/wellformed.py)."""
    return clean(json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str))


def record_feedback(
    trace_id: str,
    user: str,
    rating: str,
    *,
    comment: str | None = None,
    filename: str = "answers.jsonl",
) -> dict[str, Any]:
    """Append a user's 👍 (``up``) / 👎 (``down``) on one answer to the answer log.

    The record sits in the same file as the answers (``"event": "feedback"``), so one log
    carries both and ``rag datasets mine`` can apply seed 004 §8.3's "≥ 3 users 👎" rule.
    Returns the record written. One ``write`` of one line in append mode, so concurrent
    writers never interleave inside a line. The record is validated as the reader validates
    it (:class:`FeedbackRecord`): a value the reader would refuse raises ``ValueError`` and
    nothing is written.
    """
    if rating not in FEEDBACK_RATINGS:
        raise ValueError(f"rating must be one of {FEEDBACK_RATINGS}, got {rating!r}")
    typed = FeedbackRecord.model_validate(
        {"trace_id": trace_id, "user": user, "rating": rating, "ts": now_ts(), "comment": comment}
    )  # pydantic's ValidationError is a ValueError
    record: dict[str, Any] = typed.model_dump(exclude_none=True)
    if not comment:
        record.pop("comment", None)
    directory = logs_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / filename).open("a", encoding="utf-8") as f:
        f.write(dumps(record) + "\n")
    return record
