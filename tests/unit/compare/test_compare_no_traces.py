"""`rag eval compare` reads reports without their traces (issue 14): the same comparison."""

from __future__ import annotations

import json
from pathlib import Path

from app.eval.compare import compare_files, compare_reports, comparison_markdown
from app.eval.report.io import load_report
from tests.support.reports import run_smoke


def _run_smoke(out: Path) -> Path:
    return run_smoke(out, 6)


def test_compare_without_traces_is_the_comparison_with_them(tmp_path: Path) -> None:
    base = _run_smoke(tmp_path / "a")
    data = json.loads(base.read_text(encoding="utf-8"))
    assert sum(c["trace"] is not None for c in data["cases"]) >= 5  # real traces to drop
    judges = {k for k, v in data["metrics"].items() if v["kind"] == "judge"}
    assert judges
    for i, case in enumerate(data["cases"]):  # a second report: some judge scores moved
        for name in judges & set(case["metrics"]):
            value = case["metrics"][name]["value"]
            if i % 2 == 0 and value is not None:
                case["metrics"][name]["value"] = max(1.0, value - 1.0)
        case["answer"] = (case["answer"] or "") + (" (changed)" if i % 3 == 0 else "")
    data["run_id"] = data["run_id"][:-6] + "bbbbbb"
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    light = load_report(base, traces=False)
    full = load_report(base)
    assert all(c.trace is None for c in light.cases)
    assert light == full.model_copy(
        update={"cases": [c.model_copy(update={"trace": None}) for c in full.cases]}
    )
    with_traces = compare_reports(
        load_report(base), load_report(new), base_name=str(base), new_name=str(new)
    )
    assert compare_files(base, new).to_dict() == with_traces.to_dict()
    assert comparison_markdown(compare_files(base, new)) == comparison_markdown(with_traces)
    assert with_traces.answers.changed  # the answers line was exercised
