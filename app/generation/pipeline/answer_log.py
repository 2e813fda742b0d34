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
            line = record.getMessage()
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
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str)
