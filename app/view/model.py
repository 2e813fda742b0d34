"""What the viewer shows, computed from typed reports (:func:`app.eval.report.load_report`).

* :class:`RunStore` — the runs in a folder (``eval_*.json``), each read once per file
  change; an unreadable file is listed with its error, never skipped silently.
* :func:`case_rows` / :func:`compare_rows` — the compact rows the case tables filter,
  search, sort and page through in the browser (the full cases stay on their own pages).
* :func:`case_view` — one case with its golden answer and history from the dataset (by
  case id), ``must_include`` hits, retrieved chunks with their ACL from the knowledge base.

Numbers are the report's own; only the per-case before/after classification of a compare
is computed here (the delta table and its statistics are :mod:`app.eval.compare`'s).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from app.errors import RagError
from app.eval.records import CaseResult, Report
from app.eval.render import cost_text
from app.paths import kb_dir, repo_root

__all__ = [
    "CaseView",
    "RunEntry",
    "RunStore",
    "case_file_name",
    "case_rows",
    "case_view",
    "compare_rows",
    "fmt_cost",
    "fmt_num",
]

SNIPPET = 240  # characters of a question/answer carried in a table row (search + display)


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
    report: Report | None
    error: str | None = None

    @property
    def created_at(self) -> str:
        return self.report.created_at if self.report else ""


@dataclass
class RunStore:
    folder: Path
    _cache: dict[Path, tuple[float, RunEntry]] = field(default_factory=dict)

    def entries(self) -> list[RunEntry]:
        """Every ``eval_*.json`` under the folder, newest first (re-read when changed)."""
        from app.eval.report import load_report

        out: list[RunEntry] = []
        seen: set[str] = set()
        files = sorted(self.folder.rglob("eval_*.json")) if self.folder.is_dir() else []
        for path in files:
            mtime = path.stat().st_mtime
            cached = self._cache.get(path)
            if cached is None or cached[0] != mtime:
                try:
                    report: Report | None = load_report(path)
                    entry = RunEntry(key="", path=path, report=report)
                except RagError as exc:
                    entry = RunEntry(key="", path=path, report=None, error=str(exc))
                self._cache[path] = (mtime, entry)
            entry = self._cache[path][1]
            key = entry.report.run_id if entry.report else path.stem
            entry.key = key if key not in seen else path.stem
            seen.add(entry.key)
            out.append(entry)
        out.sort(key=lambda e: (e.created_at, e.key), reverse=True)
        return out

    def get(self, key: str) -> RunEntry | None:
        return next((e for e in self.entries() if e.key == key), None)


def run_row(entry: RunEntry) -> dict[str, Any]:
    """One line of the runs list."""
    r = entry.report
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
        "status": r.status + (" (partial)" if r.partial else ""),
        "date": r.created_at,
        "cases": f"{r.totals.cases_done}/{r.totals.cases_planned}",
        "cost": cost_text(r.totals),
    }


def priced(report: Report) -> bool:
    """Is every call of the run priced? A call to a model missing from the price table
    costs an unknown amount (``EngineStats.unpriced_calls``): the run is "unpriced", not $0."""
    engine = report.totals.engine
    return engine is None or engine.unpriced_calls == 0


# ---------------------------------------------------------------- case rows


def _verdict(report: Report, case: CaseResult) -> str:
    bad = report.bad_case(case.id)
    if bad is None:
        return "ok"
    return "bad-hard" if bad.hard else "bad-quality"


def _snip(text: str | None) -> str:
    if not text:
        return ""
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def case_rows(report: Report, href: Mapping[str, str]) -> list[dict[str, Any]]:
    """The compact rows of a run's case table (``href``: case id → its page)."""
    rows: list[dict[str, Any]] = []
    for case in report.cases:
        bad = report.bad_case(case.id)
        trace = case.trace
        rows.append(
            {
                "id": case.id,
                "href": href[case.id],
                "q": _snip(case.question),
                "a": _snip(case.answer),
                "tags": case.tags,
                "difficulty": case.difficulty or "unspecified",
                "verdict": _verdict(report, case),
                "why": [r.message for r in bad.reasons] if bad else [],
                "errors": len(case.errors),
                "refused": case.refused,
                "expected_refusal": case.expected_refusal,
                "m": {name: case.value(name) for name in report.metrics},
                "cost": case.cost_usd,
                "latency_ms": trace.latency_ms if trace else None,
            }
        )
    return rows


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
                "q": _snip(case.question),
                "tags": case.tags,
                "difficulty": case.difficulty or "unspecified",
                "a_base": _snip(old.answer),
                "a_new": _snip(case.answer),
                "changed": (old.answer or "") != (case.answer or ""),
                "improved": better,
                "regressed": worse,
                "newly_refused": bool(case.refused) and not bool(old.refused),
                "newly_answered": bool(old.refused) and not bool(case.refused),
                "errors": len(case.errors) + len(old.errors),
                "d": deltas,
            }
        )
    return rows


# ---------------------------------------------------------------- one case


@dataclass(frozen=True)
class ChunkView:
    rank: int
    chunk_id: str
    title: str
    score: float
    raw_score: float
    query: str
    acl: str  # "employee, hr" or why it is unknown
    in_context: int | None  # its document number [n] in the prompt, if it was supplied
    golden: bool


@dataclass(frozen=True)
class CaseView:
    case: CaseResult
    golden_answer: str | None
    history: list[tuple[str, str]]
    dataset_note: str | None  # why the golden answer is missing or may be out of date
    must_include: list[tuple[str, bool]]
    must_not_include: list[tuple[str, bool]]
    chunks: list[ChunkView]
    answer_parts: list[tuple[str, str]]  # (kind, text): text | cite-ok | cite-bad
    judge: list[dict[str, Any]]  # per judge metric: samples with score + reasoning


@cache
def _kb_acl() -> dict[str, tuple[str, ...]]:
    from app.retrieval.kb import load_kb

    try:
        kb = load_kb(kb_dir())
    except RagError:
        return {}
    return {c.chunk_id: c.acl for c in kb.chunks}


@cache
def _dataset_cases(path: str, sha256: str) -> tuple[dict[str, Any], str | None]:
    from app.eval.datasets import load_dataset_file

    file = Path(path) if Path(path).is_absolute() else repo_root() / path
    if not file.is_file():
        return {}, f"dataset file {path} is not here: golden answers cannot be shown"
    try:
        suite = load_dataset_file(file)
    except RagError as exc:
        return {}, f"dataset file {path} does not load ({exc})"
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    note = None
    if sha256 and digest != sha256.removeprefix("sha256:"):
        note = f"{path} changed since this run (sha256 differs): the golden answer may differ"
    return {c.id: c for c in suite.cases}, note


def _answer_parts(case: CaseResult) -> list[tuple[str, str]]:
    text = case.answer or ""
    valid = {c.n: c.valid for c in case.trace.citations} if case.trace else {}
    parts: list[tuple[str, str]] = []
    pos = 0
    for m in re.finditer(r"\[(\d{1,3})\]", text):
        parts.append(("text", text[pos : m.start()]))
        n = int(m.group(1))
        parts.append(("cite-ok" if valid.get(n) else "cite-bad", m.group(0)))
        pos = m.end()
    parts.append(("text", text[pos:]))
    return [p for p in parts if p[1]]


def case_view(report: Report, case: CaseResult) -> CaseView:
    from app.text import contains

    golden: Any = None
    note: str | None = None
    for ref in report.meta.datasets:
        cases, note = _dataset_cases(ref.path, ref.sha256)
        golden = cases.get(case.id)
        if golden is not None:
            break
    if golden is None and note is None:
        note = "this case id is not in the run's dataset file"
    answer = case.answer or ""
    trace = case.trace
    acl = _kb_acl()
    context = list(trace.context_chunk_ids) if trace else []
    golden_ids: Sequence[str] = golden.golden_chunk_ids if golden is not None else ()
    chunks = [
        ChunkView(
            rank=i + 1,
            chunk_id=h.chunk_id,
            title=h.title,
            score=h.score,
            raw_score=h.raw_score,
            query=h.query,
            acl=", ".join(acl[h.chunk_id]) if h.chunk_id in acl else "unknown (not in the KB)",
            in_context=context.index(h.chunk_id) + 1 if h.chunk_id in context else None,
            golden=h.chunk_id in golden_ids,
        )
        for i, h in enumerate(trace.retrieved if trace else [])
    ]
    judge: list[dict[str, Any]] = []
    for name, score in case.metrics.items():
        info = report.metrics.get(name)
        if info is None or info.kind != "judge":
            continue
        reasons = score.detail.get("reasoning") or []
        errors = score.detail.get("errors") or []
        samples = [
            {
                "i": i + 1,
                "score": s,
                "reasoning": reasons[i] if i < len(reasons) else None,
            }
            for i, s in enumerate(score.samples or [])
        ]
        judge.append(
            {
                "metric": name,
                "value": score.value,
                "spread": score.spread,
                "reason": score.reason,
                "prompt": score.detail.get("judge_prompt"),
                "samples": samples,
                "errors": errors,
            }
        )
    return CaseView(
        case=case,
        golden_answer=golden.golden_answer if golden is not None else None,
        history=[(t.role, t.content) for t in golden.history] if golden is not None else [],
        dataset_note=note,
        must_include=[(t, contains(answer, t)) for t in (golden.must_include if golden else [])],
        must_not_include=[
            (t, contains(answer, t)) for t in (golden.must_not_include if golden else [])
        ],
        chunks=chunks,
        answer_parts=_answer_parts(case),
        judge=judge,
    )
