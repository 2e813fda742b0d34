"""What the viewer shows, computed from typed reports (:func:`app.eval.report.io.load_report`).

* :class:`RunStore` — the runs in a folder (``eval_*.json``), each one's summary read once
  per file change (the cases only when a page needs them: a run page through its index,
  :mod:`app.view.index`); an unreadable file is listed with its error, never skipped silently.
* :func:`compare_rows` — the compact rows the compare page's case table filters, searches,
  sorts and pages through in the browser (a run's rows and one case's page data are
  :mod:`app.view.casedata`'s).

Numbers are the report's own; only the per-case before/after classification of a compare
is computed here (the delta table and its statistics are :mod:`app.eval.compare`'s).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import RagError
from app.eval.report.records import Report, ReportSummary
from app.eval.report.render import cost_text
from app.eval.report.status import status_line
from app.view.casedata import snip

if TYPE_CHECKING:
    from app.view.index import RunIndex

__all__ = ["RunEntry", "RunStore", "case_file_name", "compare_rows", "fmt_cost", "fmt_num"]


def fmt_num(value: float | None, digits: int = 3) -> str:
    return "no data" if value is None else f"{value:.{digits}f}"


def fmt_cost(value: float | None, priced: bool = True) -> str:
    """``$0.0123``; ``unpriced`` when the run's model has no price (never ``$0.0000``)."""
    if value is None or not priced:
        return "unpriced"
    return f"${value:.4f}"


def case_file_name(case_id: str) -> str:
    """A file name for a case page: readable, unique (hash of the id), safe on every OS."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", case_id)[:60].strip("._") or "case"
    return f"{safe}-{hashlib.sha1(case_id.encode('utf-8')).hexdigest()[:8]}.html"


# ---------------------------------------------------------------- runs in a folder


@dataclass
class RunEntry:
    key: str  # the run id (the file stem when two files carry the same id)
    path: Path
    summary: ReportSummary | None  # everything but the cases (a line-layout report: line 1)
    error: str | None = None
    _report: Report | None = field(default=None, repr=False)
    #: when the file was last written (ns): orders runs whose ``created_at`` (whole
    #: seconds) is the same — two runs can end within one second
    written_ns: int = 0

    @property
    def created_at(self) -> str:
        return self.summary.created_at if self.summary else ""

    @property
    def report(self) -> Report | None:
        """The whole typed report, read on first use (the compare pages, a case page of a
        report not in the line layout): ``None`` when the summary could not be read."""
        if self.summary is None:
            return None
        if self._report is None:
            from app.eval.report.io import load_report

            self._report = load_report(self.path)
        return self._report


@dataclass
class RunStore:
    folder: Path
    _cache: dict[Path, tuple[tuple[float, int], RunEntry]] = field(default_factory=dict)
    _indexes: dict[Path, tuple[tuple[float, int], RunIndex]] = field(default_factory=dict)

    def entries(self) -> list[RunEntry]:
        """Every ``eval_*.json`` under the folder, newest first (by ``created_at``, then by
        when the file was written: the base of a compare is the older run; re-read when changed). Only
        each report's summary is read: a report in the runner's line layout, its first line."""
        from app.eval.report.stream import read_summary

        out: list[RunEntry] = []
        seen: set[str] = set()
        files = sorted(self.folder.rglob("eval_*.json")) if self.folder.is_dir() else []
        for path in files:
            st = path.stat()
            stamp = (st.st_mtime, st.st_size)
            cached = self._cache.get(path)
            if cached is None or cached[0] != stamp:
                try:
                    entry = RunEntry(key="", path=path, summary=read_summary(path))
                except RagError as exc:
                    entry = RunEntry(key="", path=path, summary=None, error=str(exc))
                self._cache[path] = (stamp, entry)
                self._indexes.pop(path, None)
            entry = self._cache[path][1]
            entry.written_ns = st.st_mtime_ns
            key = entry.summary.run_id if entry.summary else path.stem
            entry.key = key if key not in seen else path.stem
            seen.add(entry.key)
            out.append(entry)
        out.sort(key=lambda e: (e.created_at, e.written_ns, e.key), reverse=True)
        return out

    def get(self, key: str) -> RunEntry | None:
        return next((e for e in self.entries() if e.key == key), None)

    def index(self, entry: RunEntry) -> RunIndex:
        """The case index of the entry's report (:mod:`app.view.index`): read from the cache
        on disk, else built by one pass over the report; kept in memory per file version."""
        from app.view.index import open_index

        st = entry.path.stat()
        stamp = (st.st_mtime, st.st_size)
        held = self._indexes.get(entry.path)
        if held is None or held[0] != stamp:
            held = (stamp, open_index(entry.path))
            self._indexes[entry.path] = held
        return held[1]


def run_row(entry: RunEntry) -> dict[str, Any]:
    """One line of the runs list."""
    r = entry.summary
    if r is None:
        return {"key": entry.key, "path": str(entry.path), "error": entry.error}
    meta = r.meta
    return {
        "key": entry.key,
        "path": str(entry.path),
        "error": None,
        "suite": meta.suite,
        "datasets": ", ".join(f"{d.name} v{d.version}" for d in meta.datasets),
        "prompts": [p.version for p in meta.prompts.values()],
        "candidate": meta.candidate.provider + (" (offline)" if meta.candidate.offline else ""),
        "judge": (meta.judge.provider or "no judge") + (" (offline)" if meta.judge.offline else ""),
        "status": r.status,  # pass / fail / partial: the badge's colour
        "status_line": status_line(r),  # the run's one status line (app.eval.report.status)
        "date": r.created_at,
        "cases": f"{r.totals.cases_done}/{r.totals.cases_planned}",
        "cost": cost_text(r.totals),
    }


def _direction(report: Report, metric: str) -> int:
    """+1 higher is better, -1 lower is better, 0 no direction or a cost (latency, tokens,
    money: a cost is not a quality change, as in :mod:`app.eval.compare`)."""
    from app.eval.compare.rows import COST_GROUPS

    info = report.metrics.get(metric)
    if info is None or info.direction == "none" or info.group in COST_GROUPS:
        return 0
    return 1 if info.direction == "higher" else -1


def compare_rows(base: Report, new: Report, href: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per paired case: both answers (snippets), the metric deltas and what changed."""
    rows: list[dict[str, Any]] = []
    base_by_id = {c.id: c for c in base.cases}
    for case in new.cases:
        old = base_by_id.get(case.id)
        if old is None:
            continue
        deltas: dict[str, float | None] = {}
        better = worse = False
        for name in new.metrics:
            b, n = old.value(name), case.value(name)
            d = None if b is None or n is None else n - b
            deltas[name] = d
            sign = _direction(new, name)
            if d is not None and abs(d) > 1e-9 and sign:
                better |= sign * d > 0
                worse |= sign * d < 0
        rows.append(
            {
                "id": case.id,
                "href": href[case.id],
                "q": snip(case.question),
                "tags": case.tags,
                "difficulty": case.difficulty or "unspecified",
                "a_base": snip(old.answer),
                "a_new": snip(case.answer),
                "changed": (old.answer or "") != (case.answer or ""),
                "improved": better,
                "regressed": worse,
                "newly_refused": bool(case.refused) and not bool(old.refused),
                "newly_answered": bool(old.refused) and not bool(case.refused),
                "errors": len(case.errors) + len(old.errors),
                "outcome": case.outcome,  # the new run's outcome class (the filter)
                "d": deltas,
            }
        )
    return rows
