"""Read schema version 1 reports (written before the typed records) as version 2.

Version 1 had the same numbers under the same names; version 2 differs in shape only:

* a case whose pipeline failed had ``"trace": {}`` — now ``null``;
* fields version 1 left optional are required: a case's ``question`` (``""``),
  ``expected_refusal`` (``false``), ``red_lines`` (recomputed from the red-line metrics)
  and ``cost_usd`` (``0``); ``meta.front_end`` (``"api"``), ``meta.resumed_from``,
  ``meta.judge.temperature`` (``0``), ``totals.candidate_cost_usd`` /
  ``judge_cost_usd`` (recomputed from the judge scores' recorded cost);
* ``totals.engine`` ``{}`` (an engine without counters) is ``null``;
* ``meta.thresholds.bad_judge_score`` is recorded: version 1 always used 3;
* ``bad_cases`` carry typed reasons, so they are recomputed with today's one policy
  (:func:`app.eval.report.summary.bad_cases`) at that score of 3.

A version 1 report that does not convert (a field missing that version 1 required too,
a wrong type) is refused with the problems and what to do.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from app.errors import ReportError
from app.eval.report.records import SCHEMA_VERSION, Report, validation_problems
from app.eval.report.summary import bad_cases

V1_BAD_JUDGE_SCORE = 3.0  # hard-coded in version 1 (app/eval/report/io.py BAD_JUDGE_SCORE)


def _dict(node: Any) -> dict[str, Any]:
    return node if isinstance(node, dict) else {}


def _convert(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(data))
    out["schema_version"] = SCHEMA_VERSION
    out.setdefault("partial_reason", None)
    specs = _dict(out.get("metrics"))
    red_line = {name for name, spec in specs.items() if _dict(spec).get("red_line")}
    judge_names = {name for name, spec in specs.items() if _dict(spec).get("kind") == "judge"}
    judge_cost = 0.0
    for case in out.get("cases") or []:
        if not isinstance(case, dict):
            continue
        if case.get("trace") == {}:
            case["trace"] = None
        case.setdefault("question", "")
        case.setdefault("expected_refusal", False)
        case.setdefault("cost_usd", 0.0)
        metrics = _dict(case.get("metrics"))
        case.setdefault(
            "red_lines",
            [n for n in sorted(red_line) if (_dict(metrics.get(n)).get("value") or 0) > 0],
        )
        for name, score in metrics.items():
            if name in judge_names and _dict(score).get("samples") is not None:
                cost = _dict(_dict(score).get("detail")).get("cost_usd", 0.0)
                judge_cost += float(cost) if isinstance(cost, int | float) else 0.0
    meta = out.get("meta")
    if isinstance(meta, dict):
        meta.setdefault("front_end", "api")
        meta.setdefault("resumed_from", None)
        if isinstance(meta.get("judge"), dict):
            meta["judge"].setdefault("temperature", 0.0)
        if isinstance(meta.get("thresholds"), dict):
            meta["thresholds"].setdefault("bad_judge_score", V1_BAD_JUDGE_SCORE)
    totals = out.get("totals")
    if isinstance(totals, dict):
        total = totals.get("cost_usd", 0.0)
        if isinstance(total, int | float):
            totals.setdefault("judge_cost_usd", round(judge_cost, 8))
            totals.setdefault("candidate_cost_usd", round(max(total - judge_cost, 0.0), 8))
        if totals.get("engine") == {}:
            totals["engine"] = None
    out["bad_cases"] = []  # recomputed below from the typed cases
    return out


def upgrade(data: Mapping[str, Any], source: str) -> Report:
    """A version 1 report as a :class:`Report`, or a :class:`ReportError` saying why not."""
    converted = _convert(data)
    try:
        report = Report.model_validate(converted)
    except ValidationError as exc:
        raise ReportError(
            f"{source}: a schema_version 1 report that cannot be converted to version "
            f"{SCHEMA_VERSION}; {validation_problems(exc, converted)}\nRe-run the suite (`rag eval run --suite "
            "SUITE`) to write a version 2 report, or compare it with the rag-starter release "
            "that wrote it."
        ) from None
    bad = bad_cases(report.cases, report.metrics, V1_BAD_JUDGE_SCORE)
    return report.model_copy(update={"bad_cases": bad})
