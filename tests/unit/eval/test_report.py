"""Report writing: schema validation, no NaN, atomic files, markdown beside the JSON."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.errors import ReportError
from app.eval.report import validate_report, write_report
from app.eval.runner import RunConfig, run_sync


def test_nan_and_schema_violations_are_refused(eval_root: Path, tmp_path: Path) -> None:
    report = run_sync(RunConfig(suite="mini", cache=False, judge_samples=1), write=False).report
    validate_report(report)
    bad = copy.deepcopy(report)
    bad["summary"]["mrr"]["mean"] = float("nan")
    with pytest.raises(ReportError, match=r"is nan"):
        validate_report(bad)
    null_without_reason = copy.deepcopy(report)
    null_without_reason["cases"][0]["metrics"]["mrr"] = {"value": None, "reason": None}
    with pytest.raises(ReportError, match=r"report\.schema\.json"):
        validate_report(null_without_reason)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ReportError):
        write_report(bad, out)
    assert list(out.iterdir()) == []  # nothing half-written

    path, md = write_report(report, out)
    assert sorted(p.name for p in out.iterdir()) == sorted([path.name, md.name])
    again, _ = write_report(report, out)  # same second: a second file, never overwritten
    assert again != path and json.loads(again.read_text(encoding="utf-8")) == report
