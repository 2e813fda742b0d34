"""A resumed run reads its checkpoint a page at a time (a 100,000-case checkpoint is 800 MB
of JSON): every row comes back once, in id order, older rows rewritten as they pass."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.eval.run import checkpoint as ckpt
from app.eval.run.checkpoint import Checkpoint
from tests.support import reports as r


def test_results_come_a_page_at_a_time_each_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ckpt, "RESULTS_PAGE", 2)
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cases = [r.case(f"kb-{i:03d}", {"mrr": 1.0}) for i in (4, 1, 3, 0, 2)]
    for case in cases[1:]:
        cp.save(case)
    legacy = {**json.loads(cases[0].model_dump_json()), "trace": {}}  # rewritten on the way
    cp._db.execute("INSERT INTO cases VALUES (?, ?)", ("kb-004", json.dumps(legacy)))
    seen = [case_id for case_id, _ in cp.results()]
    assert seen == [f"kb-{i:03d}" for i in range(5)]
    assert cp.done() == {c.id: c for c in cases}
    cp.close()
    rows = sqlite3.connect(tmp_path / "20261130T190000Z-ab12cd.sqlite3").execute(
        "SELECT result FROM cases WHERE case_id = 'kb-004'"
    )
    assert (
        json.loads(rows.fetchone()[0])["trace"] == json.loads(cases[0].model_dump_json())["trace"]
    )
