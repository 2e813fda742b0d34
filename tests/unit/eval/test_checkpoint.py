"""The checkpoint stores each case as ``CaseResult.model_dump_json()`` and reads it back typed."""

from __future__ import annotations

import json
import re
import sqlite3
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from app.errors import ConfigError, ReportError
from app.eval.report.records import CaseResult
from app.eval.run.checkpoint import Checkpoint, _case_json
from app.eval.scoring.base import Score
from app.generation.pipeline.trace import RetrievedChunk, RewriteTrace, Trace
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


def _trace(**update: object) -> Trace:
    base = Trace(
        trace_id="t1",
        created_at="2026-12-01T00:00:00Z",
        model="offline:extractive",
        user_acl=["public"],
        question="q",
        rewritten_query="q",
        rewrite=RewriteTrace(strategy="off", triggered=False),
        mode="assisted",
        retrieved=[
            RetrievedChunk(chunk_id="c#0", title="t", score=0.5, raw_score=1.0, query="rewritten")
        ],
    )
    return base.model_copy(update=update)


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("score spread", "metrics.mrr.spread"),
        ("judge sample", "metrics.mrr.samples[0]"),
        ("trace top score", "trace.top1_score"),
        ("retrieved chunk score", "trace.retrieved[0].score"),
        ("trace latency", "trace.latency_ms"),
    ],
)
def test_nan_in_a_typed_float_is_refused_too_not_written_as_null(
    tmp_path: Path, where: str, field: str
) -> None:
    # the row is checked by its JSON text: a NaN must reach it as the constant NaN (each
    # model of a case serialises with ser_json_inf_nan="constants"), never as a null
    nan = float("nan")
    mrr = Score(value=1.0)
    trace = _trace()
    if where == "score spread":
        mrr = Score(value=1.0, spread=nan)
    elif where == "judge sample":
        mrr = Score(value=1.0, samples=[nan])
    elif where == "trace top score":
        trace = _trace(top1_score=nan)
    elif where == "retrieved chunk score":
        chunk = trace.retrieved[0].model_copy(update={"score": nan})
        trace = _trace(retrieved=[chunk])
    else:
        trace = _trace(latency_ms=float("inf"))
    case = r.case("kb-005", {"mrr": mrr}).model_copy(update={"trace": trace})
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    with pytest.raises(ReportError, match=rf"case kb-005\.{re.escape(field)} is (nan|inf)"):
        cp.save(case)
    assert cp.done() == {}
    cp.close()


def test_a_text_that_merely_says_nan_or_infinity_is_stored() -> None:
    case = r.case("kb-006", {"mrr": 1.0}, answer="NaN and Infinity are words here")
    assert json.loads(_case_json(case)) == json.loads(case.model_dump_json())


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    if model in seen:
        return seen
    seen.add(model)
    for info in model.model_fields.values():
        stack: list[object] = [info.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                _models(tp, seen)
            stack.extend(typing.get_args(tp))
    return seen


def test_every_model_of_a_case_writes_a_nan_as_a_constant_the_check_can_see() -> None:
    models = _models(CaseResult, set())
    assert {CaseResult, Score, Trace, RetrievedChunk} <= models  # the walk reaches them
    plain = sorted(
        m.__name__ for m in models if m.model_config.get("ser_json_inf_nan") != "constants"
    )
    assert plain == [], f"{plain}: set ser_json_inf_nan='constants' (checkpoint._case_json)"


def _committed(path: Path) -> tuple[list[str], dict[str, object]]:
    """What another process sees in the checkpoint file: case ids and meta entries."""
    db = sqlite3.connect(path)
    try:
        ids = [row[0] for row in db.execute("SELECT case_id FROM cases ORDER BY case_id")]
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()
    meta.pop("config")
    return ids, meta


def test_grouped_cases_land_with_the_counters_of_their_last_case(tmp_path: Path) -> None:
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cp.commit_every = 3
    for n in (1, 2):
        cp.save(r.case(f"kb-00{n}", {"mrr": 1.0}), meta=("process:a", {"calls": n}))
    assert _committed(cp.path) == ([], {})  # not yet: a kill now re-computes these two
    cp.save(r.case("kb-003", {"mrr": 1.0}), meta=("process:a", {"calls": 3}))
    assert _committed(cp.path) == (["kb-001", "kb-002", "kb-003"], {"process:a": {"calls": 3}})
    cp.save(r.case("kb-004", {"mrr": 1.0}), meta=("process:a", {"calls": 4}))
    cp.close()  # closing (also on Ctrl-C) commits the rest
    assert _committed(cp.path) == (
        ["kb-001", "kb-002", "kb-003", "kb-004"],
        {"process:a": {"calls": 4}},
    )


def test_every_read_of_the_checkpoint_sees_its_own_grouped_cases(tmp_path: Path) -> None:
    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cp.commit_every = 100
    case = r.case("kb-001", {"mrr": 1.0})
    cp.save(case, meta=("process:a", {"calls": 1}))
    assert cp.ids() == {"kb-001"}
    assert _committed(cp.path)[0] == ["kb-001"]
    cp.save(r.case("kb-002", {"mrr": 0.0}))
    assert [json.loads(t)["id"] for t in cp.rows({"kb-002"})] == ["kb-002"]
    cp.save(r.case("kb-003", {"mrr": 0.0}), meta=("process:a", {"calls": 3}))
    assert cp.processes() == [{"calls": 3}]
    cp.save(r.case("kb-004", {"mrr": 0.0}))
    cp.set("report", "x.json")
    assert _committed(cp.path)[0] == ["kb-001", "kb-002", "kb-003", "kb-004"]
    assert cp.done()["kb-001"] == case
    cp.close()


def test_a_group_is_committed_after_at_most_group_max_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.eval.run import checkpoint

    cp = Checkpoint.create("20261130T190000Z-ab12cd", {"suite": "smoke"}, tmp_path)
    cp.commit_every = 100
    cp.save(r.case("kb-001", {"mrr": 1.0}))
    assert _committed(cp.path)[0] == []
    monkeypatch.setattr(checkpoint, "GROUP_MAX_S", 0.0)  # the group's first case is "old"
    cp.save(r.case("kb-002", {"mrr": 1.0}))
    assert _committed(cp.path)[0] == ["kb-001", "kb-002"]
    cp.close()
