"""scripts/same_report.py: two reports of the same work compare equal outside the volatile
fields (ids, clocks, latency, command, git); any other difference is found and named."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "same_report.py"
_spec = importlib.util.spec_from_file_location("same_report", SCRIPT)
assert _spec is not None and _spec.loader is not None
same_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(same_report)

REPORT: dict[str, Any] = {
    "run_id": "20261201T000000Z-aaaaaa",
    "created_at": "2026-12-01T00:00:00Z",
    "meta": {"git": {"sha": "a", "dirty": False}, "command": ["x"], "seed": 0},
    "totals": {"duration_s": 1.0, "cases_done": 1, "engine": {"calls": 10}},
    "summary": {"latency_s": {"mean": 0.1}, "mrr": {"mean": 1.0}},
    "cases": [
        {
            "id": "c1",
            "answer": "年假 5 天[1]",
            "metrics": {"latency_s": {"value": 0.2}, "mrr": {"value": 1.0}},
            "trace": {"trace_id": "t", "created_at": "x", "latency_ms": 3.0, "top1_score": 0.5},
        }
    ],
}


def test_volatile_fields_are_ignored() -> None:
    other = copy.deepcopy(REPORT)
    other["run_id"] = "20261201T000001Z-bbbbbb"
    other["created_at"] = "2026-12-01T00:00:01Z"
    other["meta"]["git"] = {"sha": "b", "dirty": True}
    other["meta"]["command"] = ["y"]
    other["totals"]["duration_s"] = 9.0
    other["summary"]["latency_s"]["mean"] = 0.9
    case = other["cases"][0]
    case["metrics"]["latency_s"]["value"] = 0.7
    case["trace"].update(trace_id="u", created_at="y", latency_ms=8.0)
    assert same_report.differences(REPORT, other) == []


def test_any_other_difference_is_named_with_its_path() -> None:
    changes = {
        "cases[0].answer": lambda r: r["cases"][0].update(answer="年假 6 天[1]"),
        "cases[0].trace.top1_score": lambda r: r["cases"][0]["trace"].update(top1_score=0.5000001),
        "totals.engine.calls": lambda r: r["totals"]["engine"].update(calls=11),
        "summary.mrr.mean": lambda r: r["summary"]["mrr"].update(mean=0.99),
        "meta.seed": lambda r: r["meta"].update(seed=1),
    }
    for path, change in changes.items():
        other = copy.deepcopy(REPORT)
        change(other)
        found = same_report.differences(REPORT, other)
        assert len(found) == 1 and found[0].startswith(f".{path}:"), (path, found)
    fewer = copy.deepcopy(REPORT)
    fewer["cases"] = []
    assert same_report.differences(REPORT, fewer) == [".cases: 1 items vs 0"]
    typed = copy.deepcopy(REPORT)
    typed["cases"][0]["metrics"]["mrr"]["value"] = 1  # 1 == 1.0, but not the same JSON
    assert len(same_report.differences(REPORT, typed)) == 1


def test_the_script_exits_0_when_same_1_when_not(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(REPORT), encoding="utf-8")
    b.write_text(json.dumps(REPORT), encoding="utf-8")
    run = [sys.executable, str(SCRIPT), str(a), str(b)]
    assert subprocess.run(run, capture_output=True, check=False).returncode == 0
    changed = copy.deepcopy(REPORT)
    changed["cases"][0]["answer"] = "x"
    b.write_text(json.dumps(changed), encoding="utf-8")
    proc = subprocess.run(run, capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and ".cases[0].answer" in proc.stdout
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, check=False)
    assert proc.returncode == 2
