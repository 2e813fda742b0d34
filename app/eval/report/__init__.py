"""Reports: the typed records of a run, and writing, reading and rendering them.

::

    from app.eval.report import Report, load_report, write_report

The modules: :mod:`.records` (``Report``, ``CaseResult``, ``RunMeta``… — the one source of
``report.schema.json``), :mod:`.io` (build, write atomically, load), :mod:`.stream` (a
report read one line at a time), :mod:`.v1` (schema 1 upgraded on read), :mod:`.summary`
(the summary from per-case digests), :mod:`.render` (markdown and terminal rows),
:mod:`.notes` (the model notes every table carries), :mod:`.merge` (``rag eval merge``)
and :mod:`.baseline` (the report behind a prompt's ``评测基线`` header line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.faces import face_attr

if TYPE_CHECKING:
    from app.eval.report.io import build_summary, load_report, write_report
    from app.eval.report.merge import merge_reports
    from app.eval.report.records import (
        SCHEMA_VERSION,
        CaseResult,
        Report,
        ReportSummary,
        RunMeta,
        Totals,
    )
    from app.eval.report.render import render_markdown
    from app.eval.report.stream import load_lean

__all__ = [
    "SCHEMA_VERSION",
    "CaseResult",
    "Report",
    "ReportSummary",
    "RunMeta",
    "Totals",
    "build_summary",
    "load_lean",
    "load_report",
    "merge_reports",
    "render_markdown",
    "write_report",
]

_EXPORTS = {
    "CaseResult": "app.eval.report.records",
    "Report": "app.eval.report.records",
    "ReportSummary": "app.eval.report.records",
    "RunMeta": "app.eval.report.records",
    "SCHEMA_VERSION": "app.eval.report.records",
    "Totals": "app.eval.report.records",
    "build_summary": "app.eval.report.io",
    "load_lean": "app.eval.report.stream",
    "load_report": "app.eval.report.io",
    "merge_reports": "app.eval.report.merge",
    "render_markdown": "app.eval.report.render",
    "write_report": "app.eval.report.io",
}


def __getattr__(name: str) -> Any:
    return face_attr(__name__, _EXPORTS, name)
