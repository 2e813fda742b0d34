"""Report writing and reading: typed validation, no NaN, atomic files, markdown beside the
JSON, the one loader, and schema version 1 reports (converted, or refused with a message)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.errors import ReportError
from app.eval.config import RunConfig
from app.eval.report.io import load_report, validate_report, write_report
from app.eval.run.runner import run_sync

V1_REPORT = Path(__file__).parents[2] / "data" / "reports" / "v1_adversarial.json"


def test_nan_and_schema_violations_are_refused(eval_root: Path, tmp_path: Path) -> None:
    report = run_sync(RunConfig(suite="mini", cache=False, judge_samples=1), write=False).report
    data = json.loads(report.model_dump_json())
    assert validate_report(data) == report

    nan_dict = json.loads(report.model_dump_json())
    nan_dict["summary"]["mrr"]["mean"] = float("nan")
    with pytest.raises(ReportError, match=r"summary/mrr/mean: Input should be a finite number"):
        validate_report(nan_dict)

    null_without_reason = json.loads(report.model_dump_json())
    null_without_reason["cases"][0]["metrics"]["mrr"] = {"value": None, "reason": None}
    with pytest.raises(ReportError, match=r"metric 'mrr' is null without a reason"):
        validate_report(null_without_reason)

    nan_score = json.loads(report.model_dump_json())
    nan_score["cases"][0]["metrics"]["mrr"]["value"] = float("nan")  # json.loads reads NaN
    with pytest.raises(ReportError, match=r"metric 'mrr' is nan; an undefined value is null"):
        validate_report(nan_score)

    unknown_field = json.loads(report.model_dump_json())
    unknown_field["totals"]["cost_usdd"] = 0.0
    with pytest.raises(ReportError, match=r"totals/cost_usdd: Extra inputs are not permitted"):
        validate_report(unknown_field)

    # a NaN that skipped validation (inside a metric's free-form detail) is refused at write
    first = report.cases[0]
    mrr = first.metrics["mrr"].model_copy(update={"detail": {"x": float("nan")}})
    bad_case = first.model_copy(update={"metrics": {**first.metrics, "mrr": mrr}})
    bad = report.model_copy(update={"cases": [bad_case, *report.cases[1:]]})
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ReportError, match=r"report\.cases\[0\]\.metrics\.mrr\.detail\.x is nan"):
        write_report(bad, out)
    assert list(out.iterdir()) == []  # nothing half-written

    path, md = write_report(report, out)
    assert sorted(p.name for p in out.iterdir()) == sorted([path.name, md.name])
    again, _ = write_report(report, out)  # same second: a second file, never overwritten
    assert again != path and load_report(again) == report
    assert json.loads(again.read_text(encoding="utf-8"))["schema_version"] == "2"


def test_load_report_names_the_file_for_every_kind_of_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"missing\.json: no such report"):
        load_report(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{\n "run_id": ', encoding="utf-8")
    with pytest.raises(ReportError, match=r"broken\.json:2: not valid JSON"):
        load_report(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[]", encoding="utf-8")
    with pytest.raises(ReportError, match=r"list\.json: a report is a JSON object, got list"):
        load_report(listed)
    future = tmp_path / "future.json"
    future.write_text('{"schema_version": "3"}', encoding="utf-8")
    with pytest.raises(ReportError, match=r"future\.json: schema_version '3' is not one"):
        load_report(future)


# ---------------------------------------------------------------- schema version 1


def v1() -> dict[str, Any]:
    """A report written by the untyped harness (main at 0ae2d5f, `rag eval run --suite
    adversarial --limit 6 --judge-samples 1`), kept byte for byte in tests/data."""
    data: dict[str, Any] = json.loads(V1_REPORT.read_text(encoding="utf-8"))
    assert data["schema_version"] == "1"
    return data


def test_a_v1_report_loads_converted_with_the_same_numbers() -> None:
    old = v1()
    report = load_report(V1_REPORT)
    assert report.schema_version == "2"
    # same metrics, numbers and verdicts as the file says
    assert report.model_dump(mode="json")["summary"] == {
        name: {"reason": None, **dist} for name, dist in old["summary"].items()
    }
    assert {n: v.model_dump() for n, v in report.verdicts.items()} == old["verdicts"]
    assert report.status == old["status"] == "fail"
    for case, raw in zip(report.cases, old["cases"], strict=True):
        assert case.id == raw["id"] and case.answer == raw["answer"]
        assert {n: s.value for n, s in case.metrics.items()} == {
            n: s["value"] for n, s in raw["metrics"].items()
        }
        assert case.trace is not None and case.trace.trace_id == raw["trace"]["trace_id"]
    assert report.meta.thresholds.bad_judge_score == 3.0  # what version 1 hard-coded
    # version 1's judge-score bad cases are all still there, each with its message...
    old_reasons = {b["id"]: b["reasons"] for b in old["bad_cases"]}
    new_reasons = {b.id: [r.message for r in b.reasons] for b in report.bad_cases}
    assert set(new_reasons) == set(old_reasons)
    for cid, reasons in old_reasons.items():
        assert set(reasons) <= set(new_reasons[cid])
    # ...and the one policy adds the refusal errors version 1's list did not show
    refusal_errors = {c["id"] for c in old["cases"] if c["metrics"]["refusal_error"]["value"] == 1}
    assert refusal_errors == {"adv-002", "adv-004"}
    for cid in refusal_errors:
        assert any(r.kind == "refusal_error" and not r.hard for r in report.bad_case(cid).reasons)  # type: ignore[union-attr]


def test_a_v1_failed_case_with_an_empty_trace_converts_to_null(tmp_path: Path) -> None:
    data = v1()
    case = data["cases"][0]
    case["trace"] = {}  # how version 1 wrote a case whose pipeline raised
    case["answer"] = case["refused"] = None
    case["errors"] = ["ProviderError: boom"]
    for score in case["metrics"].values():
        score.update(value=None, reason="pipeline error: ProviderError: boom", n_errors=1)
    del case["red_lines"], case["cost_usd"], case["question"]  # optional in version 1
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    report = load_report(path)
    converted = report.cases[0]
    assert converted.trace is None and converted.red_lines == [] and converted.question == ""
    bad = report.bad_case(converted.id)
    assert bad is not None and [r.message for r in bad.hard] == [
        "evaluation error: ProviderError: boom"
    ]


def test_a_v1_report_that_cannot_be_converted_is_refused_with_what_to_do(tmp_path: Path) -> None:
    data = v1()
    del data["meta"]["datasets"]  # required in version 1 too
    data["cases"][1]["metrics"]["faithfulness"]["value"] = "high"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ReportError) as info:
        load_report(path)
    message = str(info.value)
    assert message.startswith(f"{path}: a schema_version 1 report that cannot be converted")
    assert "meta/datasets: Field required" in message
    assert "cases/1 (adv-002)/metrics/faithfulness/value" in message and "(got 'high')" in message
    assert "Re-run the suite (`rag eval run --suite SUITE`)" in message


def test_the_cli_reads_a_v1_report_and_refuses_a_broken_one_with_exit_2(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    shutil.copy(V1_REPORT, good)
    res = _rag("report", "md", str(good))
    assert res.returncode == 0, res.stderr
    assert "# Evaluation 20261201T091112Z-4bca53 — adversarial — FAIL" in res.stdout
    assert "`adv-002`: correctness = 1.00 < 3; refusal error (false_refusal)" in res.stdout

    data = v1()
    data["cases"][0]["trace"] = {"trace_id": "x"}  # a trace without its required fields
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    proc = _rag("report", "md", str(bad))
    assert proc.returncode == 2
    assert f"{bad}: a schema_version 1 report that cannot be converted" in proc.stderr
    assert "Traceback" not in proc.stderr


def _rag(*args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120
    )
