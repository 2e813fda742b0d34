"""A report file read case by case for the static export (``rag report html``).

The reading is :mod:`app.eval.report.stream`'s (the one lean reader): the summary typed,
each case's JSON line (the runner's line layout, one line at a time) checked into a
:class:`~app.eval.report.stream.LeanCase`, errors naming the file, line, case id and field.
This module adds what the pages need beside the lean view — each case's JSON text as
written (carried to the browser unchanged, no re-serialisation) and the few trace fields
the table and the case page's extras use (:class:`TraceBits`) — and the report-wide rules
:class:`~app.eval.report.records.Report` checks (unique ids, every sent text present).

A line-layout report is streamed: its cases are read as the export writes them (memory: one
case and the ids seen, whatever the number of cases). A file in another layout (one line,
indented) is read whole; schema version 1 through
:func:`app.eval.report.io.load_report` (converted), its cases dumped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from app.errors import ReportError
from app.eval.report.records import CaseResult, ReportSummary
from app.eval.report.stream import (
    LeanCase,
    NotLineLayout,
    decode_case,
    line_report,
    load_lean,
)
from app.eval.report.views import view_of
from app.generation.pipeline.trace import RetrievedChunk, SentMessage, Trace
from app.wellformed import model_json

__all__ = ["Case", "StreamedReport", "TraceBits", "read_cases"]


# The fields of a :class:`~app.generation.pipeline.trace.Trace` the pages compute with (the rest
# of the trace is drawn as data by ``static/case.js``), derived from the trace records
# (:func:`app.eval.report.views.view_of`): a field renamed there is renamed here.
if TYPE_CHECKING:
    HitBits = RetrievedChunk
    SentBits = SentMessage
    TraceBits = Trace
    _Bits = CaseResult
else:
    HitBits = view_of(RetrievedChunk, "HitBits", fields=("chunk_id",), module=__name__)
    SentBits = view_of(
        SentMessage, "SentBits", fields=("role", "sha256", "content"), module=__name__
    )
    TraceBits = view_of(
        Trace,
        "TraceBits",
        fields=("latency_ms", "retrieved", "sent"),
        nested={RetrievedChunk: HitBits, SentMessage: SentBits},
        module=__name__,
    )
    _Bits = view_of(
        CaseResult, "_Bits", fields=("trace",), nested={Trace: TraceBits}, module=__name__
    )

_BITS = msgspec.json.Decoder(_Bits)


@dataclass(frozen=True)
class Case:
    raw: bytes  # the case's JSON as in the report
    lean: LeanCase
    trace: TraceBits | None


@dataclass
class StreamedReport:
    summary: ReportSummary
    #: file order; a line-layout report's are read (and checked) as they are iterated, once:
    #: nothing but the case in hand and the ids seen so far is held
    cases: Iterable[Case]
    read: int = 0  # the cases iterated so far


def _bits(raw: bytes, where: str) -> TraceBits | None:
    try:
        return _BITS.decode(raw).trace
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ReportError(f"{where}: trace: {exc}; is this an eval report?") from None


def _check(where: str, case: Case, seen: set[str], texts: dict[str, str]) -> None:
    """Report-wide rules: unique ids; a message stored by hash has its text in the report."""
    cid = case.lean.id
    if cid in seen:
        raise ReportError(f"{where}: case id {cid!r} appears twice; ids must be unique")
    seen.add(cid)
    for m in case.trace.sent if case.trace else ():
        if m.content is None and m.sha256 not in texts:
            raise ReportError(
                f"{where}: case {cid}: sent {m.role} message {m.sha256[:12]}… is not in "
                "sent_texts (a report keeps every sent text once)"
            )


def _raw_cases(path: Path) -> list[bytes] | None:
    """Each case's JSON of a schema-2 report in any layout, parsed as one document."""
    from app.limits import limit
    from app.safe_io import read_bytes

    data = read_bytes(path, max_bytes=limit("report_file_bytes"), what="report")
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        top = msgspec.json.decode(body, type=dict[str, msgspec.Raw])
        items = msgspec.json.decode(top["cases"], type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError):
        return None
    return [bytes(item) for item in items]


def read_cases(path: Path) -> StreamedReport:
    """The summary and the cases of the report at ``path`` (module docstring): a line-layout
    report's streamed (iterate ``cases`` once), another layout's read whole. Any problem is
    a :class:`ReportError` (exit 2), raised when the case holding it is reached."""
    path = Path(path)
    try:
        summary, lines = line_report(path)
    except NotLineLayout:
        return _whole(path)
    report = StreamedReport(summary, ())
    report.cases = _streamed(path, summary, lines, report)
    return report


def _streamed(
    path: Path, summary: ReportSummary, lines: Iterator[tuple[int, bytes]], into: StreamedReport
) -> Iterator[Case]:
    seen: set[str] = set()
    for n, raw in lines:
        where = f"{path}:{n}"
        case = Case(raw, decode_case(raw, path, n), _bits(raw, where))
        _check(where, case, seen, summary.sent_texts)
        into.read += 1
        yield case


def _whole(path: Path) -> StreamedReport:
    lean = load_lean(path)  # validated, any layout
    raws = _raw_cases(path) if lean.layout == "document" else None
    if raws is None or len(raws) != len(lean.cases):
        from app.eval.report.io import load_report

        raws = [model_json(c).encode("utf-8") for c in load_report(path).cases]
    seen: set[str] = set()
    cases = []
    for i, (raw, case) in enumerate(zip(raws, lean.cases, strict=True)):
        where = f"{path}: cases[{i}]"
        one = Case(raw, case, _bits(raw, where))
        _check(where, one, seen, lean.summary.sent_texts)
        cases.append(one)
    return StreamedReport(lean.summary, cases, len(cases))
