"""Structured answer and bad-case logs (seed 004 §1: every answer's log carries
``prompt_version``).

Records go through ordinary :mod:`logging` loggers; :func:`install` attaches a handler that
appends each record's message (already one JSON object) to a ``.jsonl`` file under
:func:`app.paths.logs_dir` — resolved at write time so ``RAG_LOG_DIR`` set by a test or a
run is honoured. Nothing secret is ever logged (no keys; only readable chunk ids).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from app.paths import logs_dir
from app.wellformed import clean

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


FEEDBACK_RATINGS = ("up", "down")


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
    writers never interleave inside a line.
    """
    from datetime import UTC, datetime

    if rating not in FEEDBACK_RATINGS:
        raise ValueError(f"rating must be one of {FEEDBACK_RATINGS}, got {rating!r}")
    record: dict[str, Any] = {
        "event": "feedback",
        "trace_id": trace_id,
        "user": user,
        "rating": rating,
        "ts": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if comment:
        record["comment"] = comment
    directory = logs_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / filename).open("a", encoding="utf-8") as f:
        f.write(dumps(record) + "\n")
    return record
