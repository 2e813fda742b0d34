"""The writers' side of the one rule for text that is not valid Unicode (app/wellformed.py):
a log line, an answer-log record and a pydantic record holding a lone surrogate are written
with U+FFFD, never an ``UnicodeEncodeError``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.redact import install_log_redaction
from app.wellformed import model_json


def test_a_log_line_with_a_lone_surrogate_is_written(tmp_path: Path) -> None:
    install_log_redaction()
    path = tmp_path / "x.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    errors: list[str] = []
    handler.handleError = lambda record: errors.append(str(record.msg))  # type: ignore[method-assign]
    logger = logging.getLogger("tests.wellformed")
    logger.addHandler(handler)
    try:
        logger.warning("reply was %s", "a\ud800b")
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert errors == []
    assert path.read_text(encoding="utf-8") == "reply was a\ufffdb\n"


def test_the_answer_log_writes_a_record_holding_a_lone_surrogate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.generation.pipeline.answer_log import record_feedback

    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path))
    record_feedback("t1", "u", "down", comment="c\udce9")
    line = (tmp_path / "answers.jsonl").read_text(encoding="utf-8")
    assert '"comment": "c\ufffd"' in line


def test_a_case_result_holding_a_lone_surrogate_is_written() -> None:
    from app.eval.report.records import CaseResult

    result = CaseResult(
        id="c1", question="q", tags=[], difficulty=None, expected_refusal=False, metrics={},
        answer="a\ud800", refused=False, trace=None, errors=[], red_lines=[], cost_usd=0.0,
    )  # fmt: skip
    text = model_json(result)
    assert CaseResult.model_validate_json(text).answer == "a\ufffd"
    clean = result.model_copy(update={"answer": "a"})
    assert model_json(clean) == clean.model_dump_json()  # the usual case: pydantic's own JSON
