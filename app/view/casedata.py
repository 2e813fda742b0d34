"""The data the viewer's browser code draws: table rows and one case's page.

The case page is drawn in the browser by ``static/case.js`` (one renderer for ``rag view``
and the static export) from a *payload* ``{"c": <the case's JSON as in the report>,
"x": <extras>}`` and the run's ``info``. The extras are what the report does not hold:
the bad-case verdict, the golden answer and ``must_include`` terms from the run's
dataset, each retrieved chunk's ACL from the knowledge base and the sent texts stored once
per report. Which terms the answer holds is the run's own finding (the ``completeness`` /
``must_not_include`` scores' ``missing`` / ``violations``), not recomputed here.

Rows and extras are computed from a typed :class:`~app.eval.report.records.CaseResult` (``rag
view``) or from the lean view the static export reads line by line (:mod:`app.view.stream`,
no typed trace built for 10,000 cases): the same functions for both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import msgspec

from app.errors import RagError
from app.eval.report.records import BadCase, ReportSummary
from app.paths import kb_dir, repo_root

__all__ = [
    "CaseLike",
    "Extras",
    "RowFacts",
    "TraceLike",
    "case_row",
    "priced",
    "run_info",
    "snip",
]

SNIPPET = 240  # characters of a question/answer carried in a table row (search + display)


class _Hit(Protocol):
    @property
    def chunk_id(self) -> str: ...


class _Sent(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def content(self) -> str | None: ...


class TraceLike(Protocol):
    """A typed :class:`~app.generation.pipeline.trace.Trace` or the export's
    :class:`~app.view.stream.TraceBits`."""

    @property
    def latency_ms(self) -> float: ...
    @property
    def retrieved(self) -> Sequence[_Hit]: ...
    @property
    def sent(self) -> Sequence[_Sent]: ...


class CaseLike(Protocol):
    """A lean view (:class:`~app.eval.report.stream.LeanCase`) or a typed
    :class:`~app.eval.report.records.CaseResult`."""

    @property
    def id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def answer(self) -> str | None: ...
    @property
    def tags(self) -> list[str]: ...
    @property
    def difficulty(self) -> str | None: ...
    @property
    def errors(self) -> list[str]: ...
    @property
    def refused(self) -> bool | None: ...
    @property
    def expected_refusal(self) -> bool: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def outcome(self) -> str | None: ...
    def value(self, metric: str) -> float | None: ...


# ---------------------------------------------------------------- rows


def snip(text: str | None) -> str:
    if not text:
        return ""
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def verdict(bad: BadCase | None) -> str:
    if bad is None:
        return "ok"
    return "bad-hard" if bad.hard else "bad-quality"


def case_row(
    case: CaseLike,
    trace: TraceLike | None,
    href: str,
    bad: BadCase | None,
    metrics: Iterable[str],
) -> dict[str, Any]:
    """One compact row of a run's case table (``static/view.js`` filters and sorts them)."""
    return {
        "id": case.id,
        "href": href,
        "q": snip(case.question),
        "a": snip(case.answer),
        "tags": case.tags,
        "difficulty": case.difficulty or "unspecified",
        "verdict": verdict(bad),
        "why": [r.message for r in bad.reasons] if bad else [],
        "outcome": case.outcome,
        "errors": len(case.errors),
        "refused": case.refused,
        "expected_refusal": case.expected_refusal,
        "m": {name: case.value(name) for name in metrics},
        "cost": case.cost_usd,
        "latency_ms": trace.latency_ms if trace else None,
    }


@dataclass
class RowFacts:
    """What the run page's filters need of its rows, gathered one row at a time (the page
    need not hold them): the tags, difficulties and outcome classes seen, the first
    questions (the page's language) and the number of rows."""

    tags: set[str] = field(default_factory=set)
    difficulties: set[str] = field(default_factory=set)
    first_questions: list[str] = field(default_factory=list)
    total: int = 0
    lang_of: str | None = None  # the language when known already (a stored index's)

    def add(self, row: Mapping[str, Any]) -> None:
        self.tags.update(row["tags"])
        self.difficulties.add(row["difficulty"])
        if len(self.first_questions) < 50:
            self.first_questions.append(row["q"])
        self.total += 1

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> RowFacts:
        facts = cls()
        for row in rows:
            facts.add(row)
        return facts

    @property
    def lang(self) -> str:
        from app.text import has_cjk

        if self.lang_of is not None:
            return self.lang_of
        return "zh" if any(has_cjk(t) for t in self.first_questions) else "en"


# ---------------------------------------------------------------- the run, for a case page


def priced(summary: ReportSummary) -> bool:
    """Is every call of the run priced? A call to a model missing from the price table
    costs an unknown amount (``EngineStats.unpriced_calls``): the run is "unpriced", not $0."""
    engine = summary.totals.engine
    return engine is None or engine.unpriced_calls == 0


def run_info(summary: ReportSummary, back: str, home: str | None = None) -> dict[str, Any]:
    """What every case page of a run shows besides the case: the run, its metrics' kinds,
    whether it is priced, the links back."""
    from app.generation.pipeline.trace import SENT_MESSAGE_LIMIT

    return {
        "run_id": summary.run_id,
        "suite": summary.meta.suite,
        "metrics": {n: {"kind": m.kind} for n, m in summary.metrics.items()},
        "priced": priced(summary),
        "limit": SENT_MESSAGE_LIMIT,
        "back": back,
        "home": home,
    }


@cache
def _kb_acl() -> dict[str, str]:
    from app.retrieval.kb import load_kb

    try:
        kb = load_kb(kb_dir())
    except RagError:
        return {}
    return {c.chunk_id: ", ".join(c.acl) for c in kb.chunks}


class _Turn(msgspec.Struct, frozen=True):
    role: str = ""
    content: str = ""


class _GoldenLine(msgspec.Struct, frozen=True):
    """The fields of a dataset case (:class:`~app.eval.datasets.case.Case`) a case page shows."""

    id: str
    golden_answer: str | None = None
    history: list[_Turn] = []
    must_include: list[str] = []
    must_not_include: list[str] = []
    golden_chunk_ids: list[str] = []


_GOLDEN = msgspec.json.Decoder(_GoldenLine)


def _golden_of(line: _GoldenLine) -> dict[str, Any]:
    return {
        "answer": line.golden_answer,
        "history": [[t.role, t.content] for t in line.history],
        "must_include": line.must_include,
        "must_not_include": line.must_not_include,
        "chunk_ids": line.golden_chunk_ids,
    }


@cache
def _dataset(path: str, sha256: str) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The golden fields of a run's dataset file by case id, and a note when they may be
    wrong. The file the run read (same sha256) was validated by that run: its lines are
    only parsed; a changed file is loaded by the dataset loader (its errors are the note)."""
    file = Path(path) if Path(path).is_absolute() else repo_root() / path
    if not file.is_file():
        return {}, f"dataset file {path} is not here: golden answers cannot be shown"
    data = file.read_bytes()
    if hashlib.sha256(data).hexdigest() == sha256.removeprefix("sha256:"):
        out: dict[str, dict[str, Any]] = {}
        for raw in data.removeprefix(b"\xef\xbb\xbf").splitlines():
            if not raw.strip():
                continue
            try:
                line = _GOLDEN.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # the run validated this file (same sha256): not a case line
            out[line.id] = _golden_of(line)
        return out, None
    from app.eval.datasets.case import load_dataset_file

    try:
        suite = load_dataset_file(file)
    except RagError as exc:
        return {}, f"dataset file {path} does not load ({exc})"
    note = None
    if sha256:
        note = f"{path} changed since this run (sha256 differs): the golden answer may differ"
    lines = (_GOLDEN.decode(json.dumps(c.model_dump(mode="json"))) for c in suite.cases)
    return {line.id: _golden_of(line) for line in lines}, note


@dataclass
class Extras:
    """Builds each case's extras for one run (dataset and KB read once)."""

    summary: ReportSummary

    def __post_init__(self) -> None:
        self.bad = {b.id: b for b in self.summary.bad_cases}
        self.datasets = [_dataset(d.path, d.sha256) for d in self.summary.meta.datasets]
        self.acl = _kb_acl()

    def of(self, case_id: str, trace: TraceLike | None) -> dict[str, Any]:
        golden: dict[str, Any] | None = None
        note: str | None = None
        for cases, file_note in self.datasets:
            note = file_note
            golden = cases.get(case_id)
            if golden is not None:
                break
        if golden is None and note is None:
            note = "this case id is not in the run's dataset file"
        bad = self.bad.get(case_id)
        hits = trace.retrieved if trace else []
        texts = self.summary.sent_texts
        return {
            "verdict": verdict(bad),
            "why": [r.message for r in bad.reasons] if bad else [],
            "golden": golden,
            "note": note,
            "acl": {h.chunk_id: self.acl.get(h.chunk_id) for h in hits},
            "texts": {
                m.sha256: texts[m.sha256]
                for m in (trace.sent if trace else [])
                if m.content is None and m.sha256 in texts
            },
        }
