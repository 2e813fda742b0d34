"""Issue 14: the runner streams its cases from the checkpoint to the report file and keeps
only a digest of each; the summary computed from the digests is the one the cases give."""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from app.eval.config import RunConfig
from app.eval.report.io import load_report
from app.eval.report.records import CaseResult
from app.eval.run.runner import run_sync

VOLATILE = {"latency_s"}


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_the_streamed_report_matches_a_direct_recomputation_from_its_cases(
    eval_root: Path,
) -> None:
    out = run_sync(RunConfig(suite="mini", cache=False), out_dir=eval_root / "reports")
    assert out.path is not None and out.full is None  # the run kept no cases in memory
    data: dict[str, Any] = json.loads(out.path.read_text(encoding="utf-8"))
    cases = data["cases"]
    assert [c["id"] for c in cases] == sorted(c["id"] for c in cases)
    # every distribution, recomputed here with numpy from the written cases
    for name, dist in data["summary"].items():
        scores = [c["metrics"][name] for c in cases if name in c["metrics"]]
        vals = np.array([s["value"] for s in scores if s["value"] is not None], dtype=float)
        assert dist["n"] == len(vals), name
        assert dist["n_null"] == len(scores) - len(vals), name
        assert dist["n_errors"] == sum(
            1 for s in scores if s["value"] is None and s.get("n_errors", 0) > 0
        )
        if len(vals):
            assert _close(dist["mean"], float(vals.mean())), name
            assert _close(dist["median"], float(np.median(vals))), name
            assert dist["min"] == vals.min() and dist["max"] == vals.max(), name
    # breakdowns by tag: plain means of the members' defined values
    for tag, group in data["breakdowns"]["by_tag"].items():
        members = [c for c in cases if tag in c["tags"]]
        assert group["cases"] == len(members)
        for name, gm in group["metrics"].items():
            vals = [
                c["metrics"][name]["value"]
                for c in members
                if name in c["metrics"] and c["metrics"][name]["value"] is not None
            ]
            assert gm["n"] == len(vals)
            assert _close(gm["mean"], sum(vals) / len(vals) if vals else None), (tag, name)
    totals = data["totals"]
    assert totals["cases_done"] == len(cases) == 5
    assert totals["cases_with_errors"] == sum(1 for c in cases if c["errors"])
    assert _close(totals["cost_usd"], round(sum(c["cost_usd"] for c in cases), 8))
    # a case with an evaluation error or a red line is a bad case with a hard reason
    hard = {c["id"] for c in cases if c["errors"] or c["red_lines"]}
    listed = {b["id"] for b in data["bad_cases"] if any(r["hard"] for r in b["reasons"])}
    assert hard <= listed
    cells = [c["metrics"]["refusal_error"]["detail"].get("cell") for c in cases]
    confusion = data["refusal_confusion"]
    for cell in ("true_refusal", "missed_refusal", "false_refusal", "true_answer"):
        assert confusion[cell] == cells.count(cell)
    # the typed reader gives the same report the outcome hands out
    assert out.report == load_report(out.path)
    assert out.summary.model_dump() == out.report.model_dump(exclude={"cases"})


def test_a_written_and_an_unwritten_run_have_the_same_cases_and_summary(eval_root: Path) -> None:
    cfg = RunConfig(suite="mini", cache=False, judge_samples=1)
    written = run_sync(cfg, out_dir=eval_root / "reports").report
    kept = run_sync(cfg, write=False).report

    def scores(c: CaseResult) -> dict[str, Any]:
        return {n: (s.value, s.reason) for n, s in c.metrics.items() if n not in VOLATILE}

    assert [c.id for c in written.cases] == [c.id for c in kept.cases]
    assert [scores(c) for c in written.cases] == [scores(c) for c in kept.cases]
    assert [c.answer for c in written.cases] == [c.answer for c in kept.cases]
    assert written.bad_cases == kept.bad_cases and written.verdicts == kept.verdicts


def test_the_runner_does_not_hold_every_case_result(eval_root: Path) -> None:
    """At the last case's progress update only the case in hand is alive, not all five
    (before: the runner kept every CaseResult, trace included, until the report)."""
    alive: list[int] = []

    def count() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is CaseResult)

    # other tests in the same process may still hold CaseResults (545 in the full suite):
    # count only the ones this run added
    before = count()

    def on_progress(p: Any) -> None:
        if p.done == p.total:
            alive.append(count() - before)

    run_sync(
        RunConfig(suite="mini", cache=False, judge=None, concurrency=1),
        out_dir=eval_root / "reports",
        on_progress=on_progress,
    )
    assert alive and alive[-1] <= 1, alive
