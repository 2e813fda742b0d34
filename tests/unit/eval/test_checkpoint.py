"""The checkpoint stores each case as ``CaseResult.model_dump_json()`` and reads it back typed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.errors import ConfigError, ReportError
from app.eval.checkpoint import Checkpoint
from app.eval.metrics.base import Score
from tests.support import reports as r


def test_a_case_round_trips_as_its_typed_record(tmp_path: Path) -> None:
    case = r.case("kb-001", {"faithfulness": 4.5, "acl_leak": 0.0}, question="年假？")
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cp.save(case)
    (stored,) = sqlite3.connect(cp.path).execute("SELECT result FROM cases").fetchall()
    assert json.loads(stored[0]) == json.loads(case.model_dump_json())
    assert cp.done() == {"kb-001": case}
    cp.close()


def test_a_row_written_before_the_typed_records_still_resumes(tmp_path: Path) -> None:
    case = r.case("kb-002", {"mrr": None}, answer=None, refused=None, errors=["ProviderError: x"])
    legacy = {**json.loads(case.model_dump_json()), "trace": {}}  # schema 1: a failed case
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cp._db.execute("INSERT INTO cases VALUES (?, ?)", ("kb-002", json.dumps(legacy)))
    assert cp.done() == {"kb-002": case}
    cp.close()


def test_a_corrupt_row_is_an_error_naming_the_case_not_a_silent_gap(tmp_path: Path) -> None:
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cp._db.execute("INSERT INTO cases VALUES (?, ?)", ("kb-003", '{"id": "kb-003"}'))
    with pytest.raises(ConfigError, match=r"case 'kb-003' is not a valid case result"):
        cp.done()
    cp.close()


def test_nan_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    nan = Score(value=1.0, detail={"ratio": float("nan")})
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    with pytest.raises(ReportError, match=r"case kb-004\.metrics\.mrr\.detail\.ratio is nan"):
        cp.save(r.case("kb-004", {"mrr": nan}))
    assert cp.done() == {}
    cp.close()
