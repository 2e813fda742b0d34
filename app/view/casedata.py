"""The data the viewer's browser code draws: table rows and one case's page.

The case page is drawn in the browser by ``static/case.js`` (one renderer for ``rag view``
and the static export) from a *payload* ``{"c": <the case's JSON as in the report>,
"x": <extras>}`` and the run's ``info``. The extras are what the report does not hold:
the bad-case verdict, the golden answer and ``must_include`` terms from the run's
dataset, each retrieved chunk's ACL from the knowledge base and the sent texts stored once
per report. Which terms the answer holds is the run's own finding (the ``completeness`` /
``must_not_include`` scores' ``missing`` / ``violations``), not recomputed here.

:class:`LeanCase` reads only what the rows and the extras need (pydantic, unknown fields
ignored): the static export of 10,000 cases checks each case with it, line by line,
instead of building every typed trace (:mod:`app.view.stream`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.errors import RagError
from app.eval.records import BadCase, CaseResult, ReportSummary
from app.paths import kb_dir, repo_root

__all__ = ["CaseLike", "Extras", "LeanCase", "case_info", "case_row", "run_info"]

SNIPPET = 240  # characters of a question/answer carried in a table row (search + display)


# ---------------------------------------------------------------- a case, leanly


class _Lean(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)


class LeanScore(_Lean):
    value: float | None
    reason: str | None = None


class LeanSent(_Lean):
    role: str
    sha256: str
    content: str | None = None


class LeanHit(_Lean):
    chunk_id: str


class LeanTrace(_Lean):
    latency_ms: float = 0.0
    retrieved: list[LeanHit] = Field(default_factory=list)
    sent: list[LeanSent] = Field(default_factory=list)


class LeanCase(_Lean):
    """The fields of a :class:`~app.eval.records.CaseResult` the viewer computes with, and
    its rules on them (types, finite numbers, a null value has a reason). The trace beyond
    these fields is not typed here: ``case.js`` draws it as data (text only), whatever it
    holds; ``rag view`` and every other reader use the full typed models."""

    id: str
    question: str
    tags: list[str]
    difficulty: str | None
    expected_refusal: bool
    metrics: dict[str, LeanScore]
    answer: str | None
    refused: bool | None
    trace: LeanTrace | None
    errors: list[str]
    red_lines: list[str]
    cost_usd: float = Field(ge=0)

    @model_validator(mode="after")
    def _null_has_reason(self) -> LeanCase:
        # CaseResult's rule: an undefined value says why
        for name, score in self.metrics.items():
            if score.value is None and not score.reason:
                raise ValueError(
                    f"case {self.id}: metric {name!r} is null without a reason "
                    "(an undefined value must say why)"
                )
        return self

    def value(self, metric: str) -> float | None:
        score = self.metrics.get(metric)
        return None if score is None else score.value


class _TraceLike(Protocol):
    @property
    def latency_ms(self) -> float: ...


class CaseLike(Protocol):
    """A :class:`LeanCase` or a typed :class:`~app.eval.records.CaseResult`."""

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
    def trace(self) -> _TraceLike | None: ...
    def value(self, metric: str) -> float | None: ...


# ---------------------------------------------------------------- rows


def _snip(text: str | None) -> str:
    if not text:
        return ""
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def verdict(bad: BadCase | None) -> str:
    if bad is None:
        return "ok"
    return "bad-hard" if bad.hard else "bad-quality"


def case_row(
    case: CaseLike, href: str, bad: BadCase | None, metrics: Iterable[str]
) -> dict[str, Any]:
    """One compact row of a run's case table (``static/view.js`` filters and sorts them)."""
    trace = case.trace
    return {
        "id": case.id,
        "href": href,
        "q": _snip(case.question),
        "a": _snip(case.answer),
        "tags": case.tags,
        "difficulty": case.difficulty or "unspecified",
        "verdict": verdict(bad),
        "why": [r.message for r in bad.reasons] if bad else [],
        "errors": len(case.errors),
        "refused": case.refused,
        "expected_refusal": case.expected_refusal,
        "m": {name: case.value(name) for name in metrics},
        "cost": case.cost_usd,
        "latency_ms": trace.latency_ms if trace else None,
    }


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


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _golden_of(line: Mapping[str, Any]) -> dict[str, Any]:
    answer = line.get("golden_answer")
    history = line.get("history")
    return {
        "answer": answer if isinstance(answer, str) else None,
        "history": [
            [str(t.get("role", "")), str(t.get("content", ""))]
            for t in (history if isinstance(history, list) else [])
            if isinstance(t, Mapping)
        ],
        "must_include": _strs(line.get("must_include")),
        "must_not_include": _strs(line.get("must_not_include")),
        "chunk_ids": _strs(line.get("golden_chunk_ids")),
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
        for raw in data.decode("utf-8", "replace").splitlines():
            try:
                line = json.loads(raw) if raw.strip() else None
            except ValueError:
                continue  # the run read this file: it validated; an odd line is not a case
            if isinstance(line, dict) and isinstance(line.get("id"), str):
                out[line["id"]] = _golden_of(line)
        return out, None
    from app.eval.datasets import load_dataset_file

    try:
        suite = load_dataset_file(file)
    except RagError as exc:
        return {}, f"dataset file {path} does not load ({exc})"
    note = None
    if sha256:
        note = f"{path} changed since this run (sha256 differs): the golden answer may differ"
    return {c.id: _golden_of(c.model_dump(mode="json")) for c in suite.cases}, note


@dataclass
class Extras:
    """Builds each case's extras for one run (dataset and KB read once)."""

    summary: ReportSummary

    def __post_init__(self) -> None:
        self.bad = {b.id: b for b in self.summary.bad_cases}
        self.datasets = [_dataset(d.path, d.sha256) for d in self.summary.meta.datasets]
        self.acl = _kb_acl()

    def of(self, case: LeanCase | CaseResult) -> dict[str, Any]:
        golden: dict[str, Any] | None = None
        note: str | None = None
        for cases, file_note in self.datasets:
            note = file_note
            golden = cases.get(case.id)
            if golden is not None:
                break
        if golden is None and note is None:
            note = "this case id is not in the run's dataset file"
        bad = self.bad.get(case.id)
        trace = case.trace
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


def case_info(summary: ReportSummary, case: LeanCase, extras: Extras | None = None) -> dict[str, Any]:  # fmt: skip
    """The extras of one case (``rag view``: one page at a time)."""
    return (extras or Extras(summary)).of(case)
