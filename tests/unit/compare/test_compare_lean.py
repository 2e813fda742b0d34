"""`rag eval compare` reads the files with the lean reader (app/eval/report/stream.py): the
comparison is the one of the full typed reports, for every layout (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.eval.compare import compare_files, compare_reports, comparison_markdown
from app.eval.report.io import load_report, report_chunks
from app.eval.report.records import ReportSummary
from tests.support.reports import run_smoke


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_smoke(tmp_path_factory.mktemp("smoke"), 6)


def _write_lines(data: dict[str, Any], path: Path) -> None:
    """A report in the runner's layout (summary line + one case per line)."""
    cases = data["cases"]
    summary = ReportSummary.model_validate({k: v for k, v in data.items() if k != "cases"})
    rows = lambda: (json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases)  # noqa: E731
    path.write_bytes(b"".join(report_chunks(summary, rows)()))


def _edited(smoke: Path) -> dict[str, Any]:
    """The smoke report with judge scores moved, answers and refusals changed, a case gone."""
    data = json.loads(smoke.read_text(encoding="utf-8"))
    judges = {k for k, v in data["metrics"].items() if v["kind"] == "judge"}
    assert judges
    for i, case in enumerate(data["cases"]):
        for name in judges & set(case["metrics"]):
            value = case["metrics"][name]["value"]
            if value is not None and i % 2 == 0:
                case["metrics"][name]["value"] = max(1.0, value - 1.0)
        if i % 3 == 0:
            case["answer"] = (case["answer"] or "") + " (changed)"
        if i == 4 and case["refused"] is not None:
            case["refused"] = not case["refused"]
    data["cases"].pop(5)  # unpaired in the base
    data["run_id"] = data["run_id"][:-6] + "bbbbbb"
    return data


@pytest.mark.parametrize("layout", ["lines", "document", "indented"])
def test_lean_comparison_equals_the_full_reports(smoke: Path, tmp_path: Path, layout: str) -> None:
    data = _edited(smoke)
    new = tmp_path / "new.json"
    if layout == "lines":
        _write_lines(data, new)
    else:
        indent = 2 if layout == "indented" else None
        new.write_text(json.dumps(data, ensure_ascii=False, indent=indent), encoding="utf-8")
    full = compare_reports(
        load_report(smoke), load_report(new), base_name=str(smoke), new_name=str(new)
    )
    lean = compare_files(smoke, new)
    assert lean.to_dict() == full.to_dict()  # every row, p-value, CI, tag and changed answer
    assert comparison_markdown(lean) == comparison_markdown(full)
    assert lean.answers is not None and lean.answers.changed
    assert lean.unpaired_base and lean.judge_only


def test_cli_compare_reads_lean_and_prints_the_full_table(smoke: Path, tmp_path: Path) -> None:
    from app.cli.eval_compare import compare

    new = tmp_path / "new.json"
    _write_lines(_edited(smoke), new)
    res = CliRunner().invoke(compare, [str(smoke), str(new), "--format", "json"])
    assert res.exit_code == 0, res.output
    full = compare_reports(
        load_report(smoke), load_report(new), base_name=str(smoke), new_name=str(new)
    )
    assert json.loads(res.output) == json.loads(full.to_json())
