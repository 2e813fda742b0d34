"""The nightly comparison after a dataset version bump: compared on the shared, unchanged
cases with a note — not refused, and not compared on cases whose question was edited."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.eval.config import RunConfig
from app.eval.report.io import write_report
from app.eval.run.runner import run_sync

ROOT = Path(__file__).resolve().parents[3]


def ci_eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_eval_bump", ROOT / "scripts" / "ci_eval.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ci_eval_bump"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("bump")
    report = run_sync(
        RunConfig(suite="smoke", limit=10), runs_root=tmp / "runs", write=False
    ).report
    path, _ = write_report(report, tmp / "base")
    return path, json.loads(path.read_text("utf-8"))


def _bumped(data: dict[str, Any], tmp: Path) -> Path:
    new = json.loads(json.dumps(data))
    new["run_id"] = new["run_id"][:-6] + "abcdef"
    new["meta"]["datasets"][0]["version"] = "1.1"
    new["meta"]["datasets"][0]["sha256"] = "0" * 64
    cases = new["cases"]
    cases[0]["question"] = cases[0]["question"] + "（改写）"  # edited in v1.1
    removed = cases.pop(1)["id"]
    extra = json.loads(json.dumps(cases[-1]))
    extra["id"] = "smoke-999"
    cases.append(extra)  # added in v1.1
    new["bad_cases"] = [b for b in new["bad_cases"] if b["id"] != removed]
    path = tmp / "eval_new.json"
    path.write_text(json.dumps(new, ensure_ascii=False), "utf-8")
    return path


def test_a_dataset_bump_is_compared_on_the_shared_unchanged_cases(
    baseline: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    base_path, data = baseline
    new_path = _bumped(data, tmp_path)
    body, rc = ci_eval().nightly_summary(new_path, base_path)
    assert "Not compared" not in body, body
    assert "The dataset changed" in body and "dataset smoke: base v1.0" in body
    assert "compared on the 8 cases both versions share unchanged" in body
    assert "1 new, 1 removed, 1 edited" in body
    assert rc == 0  # the shared cases are the same results: no regression


def test_another_ruler_change_is_still_refused(
    baseline: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    base_path, data = baseline
    new = json.loads(json.dumps(data))
    new["meta"]["judge"]["samples"] = 1
    path = tmp_path / "eval_judge.json"
    path.write_text(json.dumps(new, ensure_ascii=False), "utf-8")
    body, _ = ci_eval().nightly_summary(path, base_path)
    assert "Not compared with the baseline" in body and "judge samples" in body
