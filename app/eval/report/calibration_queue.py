"""Judge calibration labelled by the experts (seed 004 §10.2: every month a business expert
blind-scores 50 judge results; agreement > 85 %, below 75 % the judge prompt is revised).

The editor (``rag datasets edit``) serves this as its calibration page (``/calibrate``):

* **queue** — ``n`` judged cases of one judge metric sampled from a chosen report,
  stratified by the judge's score (the scores 1–5 taken in turn, each stratum shuffled with a
  fixed seed), so a queue is not all 5s. The judge's score and reasoning are never sent to
  the page before the expert has scored the case;
* **label** — the expert's 1–5 score and optional note, appended to the labels file as one
  :class:`app.eval.scoring.calibrate.LabelRow` with the expert as ``annotator`` and the report,
  case, judge prompt version and the judge's score beside it (what the comparison needs);
* **labels are versioned** like datasets: ``tests/eval/calibration/labels_v<major>.<minor>.jsonl``;
  a released file (committed) is never appended to — the first label of a session copies it
  into the next minor version, later labels go into that draft;
* **compare** — the labels of a file against the judge's scores they were taken from:
  exact and within-one agreement, Cohen's quadratic-weighted κ and the seed's 85 % / 75 %
  rule per judge prompt (:func:`app.eval.scoring.calibrate.agreement`), and the
  disagreements side by side (the expert's score and note beside the judge's and its reasoning).

``rag judge calibrate --labels FILE --judge J`` scores the same rows with a judge again.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import ReportError
from app.eval.datasets.case import load_dataset_file
from app.eval.datasets.versions import is_released
from app.eval.report.io import load_report
from app.eval.report.records import CaseResult, Report
from app.eval.scoring.calibrate import (
    LabelRow,
    ScoredRow,
    agreement,
    round_half_up,
    verdict_for,
)
from app.retrieval.kb import KnowledgeBase
from app.safe_io import create_new_bytes

__all__ = ["CalibrationQueue", "calibration_routes", "labels_file"]

PAGE = Path(__file__).with_name("calibration_page.html")
_LABELS = "labels_v{major}.{minor}.jsonl"


def _version(path: Path) -> tuple[int, int] | None:
    stem = path.name.removeprefix("labels_v").removesuffix(".jsonl")
    major, _, minor = stem.partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def labels_file(folder: Path) -> Path | None:
    """The newest labels file in ``folder`` (``None`` when there is none)."""
    found = [(v, p) for p in folder.glob("labels_v*.jsonl") if (v := _version(p)) is not None]
    return max(found)[1] if found else None


@dataclass
class CalibrationQueue:
    """The reports to sample from, the labels folder and who labels."""

    reports: Path
    folder: Path  # tests/eval/calibration
    kb: KnowledgeBase
    root: Path  # the repository root: a report's dataset paths are relative to it
    who: Callable[[], str | None]  # the expert's name, or None when not known yet
    released: Callable[[Path], bool] = is_released
    seed: int = 2026
    lock: threading.RLock = field(default_factory=threading.RLock)
    created: set[str] = field(default_factory=set)  # drafts this server wrote

    # ------------------------------------------------------------------ reports
    def report_files(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in sorted(self.reports.glob("eval_*.json"), reverse=True):
            try:
                report = load_report(path, traces=False)
            except ReportError as exc:  # listed, with why, instead of hidden
                rows.append({"name": path.name, "judge_metrics": [], "error": str(exc)[:200]})
                continue
            rows.append(
                {
                    "name": path.name,
                    "judge": report.meta.judge.provider,
                    "judge_metrics": report.judge_metrics,
                    "cases": len(report.cases),
                }
            )
        return rows

    def _report(self, name: str) -> Report:
        path = self.reports / Path(name).name
        if not path.is_file() or not path.name.startswith("eval_"):
            raise KeyError(name)
        return load_report(path)

    def _golden(self, report: Report) -> dict[str, str]:
        answers: dict[str, str] = {}
        for ref in report.meta.datasets:
            path = Path(ref.path)
            path = path if path.is_absolute() else self.root / path
            if path.is_file():
                answers.update((c.id, c.golden_answer) for c in load_dataset_file(path).cases)
        return answers

    def _context(self, case: CaseResult) -> str:
        ids = case.trace.context_chunk_ids if case.trace is not None else []
        texts = [c.text for i in ids if (c := self.kb.chunk(i)) is not None]
        return "\n".join(f"[{n}] {t}" for n, t in enumerate(texts, start=1))

    # ------------------------------------------------------------------ queue
    def queue(self, name: str, metric: str, n: int) -> list[dict[str, Any]]:
        """``n`` judged cases of ``metric``, stratified by the judge's score; what the expert
        sees (no judge score, no reasoning). Cases this file already labels are skipped."""
        report = self._report(name)
        if metric not in report.judge_metrics:
            raise ValueError(f"{metric!r} is not a judge metric of {name}")
        done = {(r.report, r.case_id, r.metric) for r in self.rows()}
        strata: dict[int, list[CaseResult]] = {}
        for case in report.cases:
            score = case.metrics.get(metric)
            if score is None or score.value is None or case.answer is None:
                continue
            if (report.run_id, case.id, metric) in done:
                continue
            strata.setdefault(round_half_up(score.value), []).append(case)
        rng = random.Random(f"{self.seed}:{report.run_id}:{metric}")
        for cases in strata.values():
            rng.shuffle(cases)
        chosen: list[CaseResult] = []
        while len(chosen) < n and any(strata.values()):
            for level in sorted(strata):
                if strata[level] and len(chosen) < n:
                    chosen.append(strata[level].pop())
        golden = self._golden(report)
        return [
            {
                "report": name,
                "run_id": report.run_id,
                "case": c.id,
                "metric": metric,
                "question": c.question,
                "candidate": c.answer,
                "context": self._context(c),
                "golden_answer": golden.get(c.id, ""),
                "expected_refusal": c.expected_refusal,
            }
            for c in chosen
        ]

    # ------------------------------------------------------------------ labels
    def rows(self, path: Path | None = None) -> list[LabelRow]:
        path = path or labels_file(self.folder)
        if path is None or not path.exists():
            return []
        return [
            LabelRow.model_validate_json(line)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]

    def _target(self) -> Path:
        """The labels file a new label goes to: the draft, or the next minor version of the
        newest released file (a copy of it), or ``labels_v1.0.jsonl``."""
        newest = labels_file(self.folder)
        if newest is None:
            target = self.folder / _LABELS.format(major=1, minor=0)
        elif os.path.realpath(newest) in self.created or not self.released(newest):
            return newest
        else:
            major, minor = _version(newest) or (1, 0)
            target = self.folder / _LABELS.format(major=major, minor=minor + 1)
        # never replaces a labels file (FileExistsError)
        create_new_bytes(target, newest.read_bytes() if newest is not None else b"")
        self.created.add(os.path.realpath(target))
        return target

    def label(self, name: str, case_id: str, metric: str, score: int, note: str) -> dict[str, Any]:
        annotator = self.who()
        if not annotator:
            return {"saved": False, "need_expert": True}
        if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 5:
            raise ValueError("the score is a whole number from 1 to 5")
        report = self._report(name)
        case = report.case(case_id)
        judged = case.metrics.get(metric) if case is not None else None
        if case is None or judged is None or judged.value is None or case.answer is None:
            raise ValueError(f"{case_id} has no {metric} score in {name}")
        detail = judged.detail or {}
        reasoning = detail.get("reasoning")
        if isinstance(reasoning, list):  # one per sample: the distinct ones, in order
            reasoning = "\n".join(dict.fromkeys(str(r) for r in reasoning if r))
        row = LabelRow(
            id=f"{report.run_id}:{case_id}:{metric}",
            question=case.question,
            context=self._context(case),
            candidate=case.answer,
            golden_answer=self._golden(report).get(case_id, ""),
            metric=metric,
            human_score=score,
            annotator=annotator,
            note=note.strip() or None,
            expected_refusal=case.expected_refusal,
            source=f"reports/{Path(name).name}",
            report=report.run_id,
            case_id=case_id,
            judge_prompt=str(detail.get("judge_prompt") or "") or None,
            judge_model=report.meta.judge.provider,
            judge_score=judged.value,
            judge_reasoning=str(reasoning or "") or None,
            labelled_at=dt.datetime.now(dt.UTC).date().isoformat(),
        )
        with self.lock:
            if row.id in {r.id for r in self.rows()}:
                raise ValueError(f"{case_id} ({metric}) is labelled already in this file")
            target = self._target()
            with target.open("a", encoding="utf-8") as fh:
                fh.write(row.model_dump_json(exclude_none=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return {
            "saved": True,
            "file": target.name,
            # shown only now, after the expert's own score
            "judge_score": judged.value,
            "judge_reasoning": row.judge_reasoning,
        }

    # ------------------------------------------------------------------ compare
    def compare(self) -> dict[str, Any]:
        """Agreement of the newest labels file with the judge scores its rows were taken from."""
        path = labels_file(self.folder)
        rows = [r for r in self.rows(path) if r.judge_score is not None]
        scored = [
            ScoredRow(
                r.id,
                r.judge_prompt or r.metric,
                r.human_score,
                r.judge_score,
                None if r.judge_score is None else round_half_up(r.judge_score),
            )
            for r in rows
        ]
        groups: dict[str, list[ScoredRow]] = {}
        for s in scored:
            groups.setdefault(s.metric, []).append(s)
        prompts = []
        for prompt, members in sorted(groups.items()):
            a = agreement(members)
            prompts.append({"prompt": prompt, "verdict": verdict_for(a.exact), **a.__dict__})
        disagreements = [
            {**r.model_dump(exclude_none=True), "judge_int": s.judge_score}
            for r, s in zip(rows, scored, strict=True)
            if s.judge_score != r.human_score
        ]
        return {
            "file": None if path is None else path.name,
            "rows": len(rows),
            "prompts": prompts,
            "disagreements": disagreements,
        }


def calibration_routes(
    queue: CalibrationQueue,
) -> dict[str, Callable[[dict[str, str], Any], tuple[int, Any]]]:
    """The editor's routes for the calibration page (``app.eval.datasets.editor.Route``)."""

    def page(query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, PAGE.read_bytes()

    def reports(query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, {"reports": queue.report_files()}

    def items(query: dict[str, str], body: Any) -> tuple[int, Any]:
        n = int(query.get("n", "20"))
        if not 1 <= n <= 200:
            raise ValueError("n is a whole number from 1 to 200")
        try:
            rows = queue.queue(query.get("report", ""), query.get("metric", ""), n)
        except KeyError:
            return 404, {"error": f"no report {query.get('report', '')!r}"}
        return 200, {"items": rows}

    def label(query: dict[str, str], body: Any) -> tuple[int, Any]:
        try:
            out = queue.label(
                str(body["report"]),
                str(body["case"]),
                str(body["metric"]),
                body["score"],
                str(body.get("note") or ""),
            )
        except KeyError as exc:
            return 404, {"error": f"no report or case {exc}"}
        return (200 if out["saved"] else 422), out

    def compare(query: dict[str, str], body: Any) -> tuple[int, Any]:
        return 200, queue.compare()

    return {
        "GET /calibrate": page,
        "GET /api/calibration/reports": reports,
        "GET /api/calibration/queue": items,
        "POST /api/calibration/label": label,
        "GET /api/calibration/compare": compare,
    }
