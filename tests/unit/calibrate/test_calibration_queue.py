"""The experts' review queue (app/eval/report/calibration_queue.py): stratified by the judge's
score, blind, labels versioned (a released file is never appended to), one label per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.eval.report.calibration_queue import CalibrationQueue, labels_file
from app.retrieval.kb import load_kb
from tests.support.reports import case, info, report, score

ROOT = Path(__file__).resolve().parents[3]


def _judged(value: float) -> object:
    return score(value, detail={"judge_prompt": "judge/relevance_v1", "reasoning": ["why", "why"]})


@pytest.fixture
def queue(tmp_path: Path) -> CalibrationQueue:
    levels = [5] * 10 + [1] * 2 + [3] * 2 + [2] + [4]
    cases = [
        case(f"c-{n:02d}", {"relevance": _judged(v)}, question=f"q{n}", answer=f"a{n}")  # type: ignore[dict-item]
        for n, v in enumerate(levels)
    ]
    rep = report(cases, {"relevance": info(kind="judge", unit="score", scale="continuous")})
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "eval_20261130T190000Z-ab12cd.json").write_text(rep.model_dump_json(), "utf-8")
    folder = tmp_path / "calibration"
    folder.mkdir()
    (folder / "labels_v1.0.jsonl").write_bytes(
        (ROOT / "tests/eval/calibration/labels_v1.0.jsonl").read_bytes()
    )
    who: list[str | None] = ["王五"]
    q = CalibrationQueue(
        reports=reports,
        folder=folder,
        kb=load_kb(ROOT / "tests/eval/kb/sample"),
        root=ROOT,
        who=lambda: who[0],
        released=lambda p: p.name == "labels_v1.0.jsonl",
    )
    q.who_box = who  # type: ignore[attr-defined]
    return q


def test_the_queue_is_stratified_by_the_judge_score_and_blind(queue: CalibrationQueue) -> None:
    [listed] = queue.report_files()
    assert listed["judge_metrics"] == ["relevance"] and listed["cases"] == 16
    items = queue.queue(listed["name"], "relevance", 5)
    report = queue._report(listed["name"])
    levels = sorted(int(report.case(i["case"]).metrics["relevance"].value) for i in items)  # type: ignore[union-attr,arg-type]
    assert levels == [1, 2, 3, 4, 5]  # one of each score, not five 5s
    assert all("judge" not in key and "score" not in key for i in items for key in i)
    with pytest.raises(ValueError, match="not a judge metric"):
        queue.queue(listed["name"], "hit_rate", 5)


def test_labels_go_into_the_next_version_with_the_expert_as_annotator(
    queue: CalibrationQueue,
) -> None:
    name = queue.report_files()[0]["name"]
    [item] = queue.queue(name, "relevance", 1)
    out = queue.label(name, item["case"], "relevance", 2, "  偏题  ")
    assert out["saved"] and out["file"] == "labels_v1.1.jsonl"
    assert out["judge_reasoning"] == "why"  # shown only after the expert's own score
    newest = labels_file(queue.folder)
    assert newest is not None and newest.name == "labels_v1.1.jsonl"
    released = (ROOT / "tests/eval/calibration/labels_v1.0.jsonl").read_bytes()
    assert (queue.folder / "labels_v1.0.jsonl").read_bytes() == released
    rows = queue.rows()
    assert len(rows) == 62 and rows[-1].annotator == "王五" and rows[-1].note == "偏题"
    assert rows[-1].judge_prompt == "judge/relevance_v1" and rows[-1].case_id == item["case"]
    # the same case again: refused; the queue no longer offers it
    with pytest.raises(ValueError, match="labelled already"):
        queue.label(name, item["case"], "relevance", 3, "")
    assert item["case"] not in {i["case"] for i in queue.queue(name, "relevance", 16)}
    with pytest.raises(ValueError, match="1 to 5"):
        queue.label(name, "c-00", "relevance", 6, "")
    queue.who_box[0] = None  # type: ignore[attr-defined]
    assert queue.label(name, "c-01", "relevance", 4, "") == {"saved": False, "need_expert": True}
    compared = queue.compare()
    assert compared["file"] == "labels_v1.1.jsonl" and compared["rows"] == 1
    [prompt] = compared["prompts"]
    assert prompt["prompt"] == "judge/relevance_v1" and prompt["n"] == 1
