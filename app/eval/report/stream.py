"""Read a report without loading it whole: its summary typed, its cases as lean views.

:func:`app.eval.report.io.load_report` builds every case's full pydantic record (trace,
metric details…): at 10,000 cases that is seconds and more than a gigabyte. A reader of
many cases (``rag eval compare``, the HTML index) needs a few fields of each; this module
gives it those, and the summary as the real :class:`~app.eval.report.records.ReportSummary`.

API (everything raises :class:`~app.errors.ReportError` — the CLI's exit 2 — never a
traceback; messages name the file, the line, the case id and the field):

* :data:`~app.eval.report.views.LeanCase` / :data:`~app.eval.report.views.LeanScore` — frozen
  ``msgspec`` structs with the fields of :class:`~app.eval.report.records.CaseResult` /
  :class:`~app.eval.scoring.base.Score` except the trace and a metric's ``detail``, derived
  from the pydantic models (:mod:`app.eval.report.views`); ``CompareCase`` the fewer fields
  ``rag eval compare`` reads. ``LeanCase.value(metric)`` is ``CaseResult.value(metric)``.
* :func:`load_lean(path) <load_lean>` → :class:`LeanReport` (``summary``, ``cases`` in file
  order, ``layout``). Ids are unique (as in :class:`~app.eval.report.records.Report`).
* :func:`read_summary(path) <read_summary>` — the summary only (a line-layout file: its first
  line is all that is read).
* :func:`iter_case_lines(path) <iter_case_lines>` — ``(line number, bytes)`` of each case's
  JSON in a line-layout file, one line in memory at a time (the layout is checked as it goes:
  the closing ``]}`` is checked after the last case). Decode them with :func:`decode_case`
  (lean) or :func:`typed_case` (the full :class:`CaseResult`, errors naming the line).
  A file in another layout raises :class:`NotLineLayout` (a ReportError) before any case.
* :func:`line_report(path) <line_report>` — the summary and :func:`iter_case_lines` in one
  go (the first line parsed once).
* :func:`iter_cases(path) <iter_cases>` — :class:`LeanCase` per case, streamed for a
  line-layout file.

Layouts. Reports written by this project (:func:`app.eval.report.io.write_report_rows`: a run,
``rag eval merge``) are ``{<summary>,"cases":[\\n<case>,\\n<case>\\n]}\\n`` — the summary on the
first line, one ``CaseResult.model_dump_json()`` per line. Those are streamed (``layout
"lines"``: memory ≈ one line). Any other schema-2 JSON (an older indented report, a
``json.dumps`` copy) is decoded as one document into the same lean views (``"document"``:
memory ≈ the file's size). Schema version 1 goes through :func:`load_report` and is then
projected (``"typed"``). The three give the same views of the same report.

Validation. Each case's JSON is parsed completely (syntax, UTF-8, no NaN/Infinity) and the
fields of :class:`LeanCase` are checked as pydantic checks them: a case that the lean decoder
refuses is validated by :class:`CaseResult` itself (trace dropped, as ``load_report(traces=
False)`` does), so a value pydantic coerces (``"0.5"`` for a float) is read the same way and
a real error carries pydantic's message. What a lean view does not contain (the trace, a
metric's ``detail``, unknown extra fields inside a case) is not validated here; the summary
is validated whole by :class:`ReportSummary`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import msgspec
from pydantic import ValidationError

from app.errors import ReportError
from app.eval.report.records import SCHEMA_VERSION, CaseResult, ReportSummary, validation_problems
from app.eval.report.views import CompareCase, CompareScore, LeanCase, LeanScore
from app.limits import limit
from app.safe_io import UnsafeInput, check_file, parse_json, read_bytes

__all__ = [
    "CompareCase",
    "CompareScore",
    "LeanCase",
    "LeanReport",
    "LeanScore",
    "NotLineLayout",
    "decode_case",
    "decode_lines",
    "iter_case_lines",
    "iter_cases",
    "line_report",
    "load_lean",
    "project",
    "read_case_at",
    "read_summary",
    "typed_case",
]

Layout = Literal["lines", "document", "typed"]
_CASES_OPEN = b',"cases":['
_HEAD_START = b'{"schema_version":"2",'  # how our writer's first line starts


View = TypeVar("View", LeanCase, CompareCase)


@dataclass(frozen=True)
class LeanReport(Generic[View]):
    """A report's typed summary and its cases' lean views (file order)."""

    path: Path
    summary: ReportSummary
    cases: list[View]
    layout: Layout


class NotLineLayout(ReportError):
    """The file is a report, but not in the one-case-per-line layout."""


# what msgspec raises on input it cannot decode (deep nesting included: JSON nested past the
# recursion limit is refused by safe_io's parser with a message, never a traceback)
_UNDECODABLE = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {
    LeanCase: msgspec.json.Decoder(LeanCase),
    CompareCase: msgspec.json.Decoder(CompareCase),
}
_LIST_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {
    LeanCase: msgspec.json.Decoder(list[LeanCase]),
    CompareCase: msgspec.json.Decoder(list[CompareCase]),
}
_ID_ONLY = msgspec.json.Decoder(dict[str, Any])
# the case lines are read through a 1 MB buffer: with the default 8 KB, a ≈ 7 KB line costs
# about one read() each and the lines' iteration took as long as decoding them
_READ_BUFFER = 1 << 20


def _max_bytes() -> int:
    return limit("report_file_bytes")


def _line_bytes() -> int:
    return limit("report_line_bytes")


# ---------------------------------------------------------------- one case


def _case_id(raw: bytes) -> str | None:
    try:
        obj = _ID_ONLY.decode(raw)
    except _UNDECODABLE:
        return None
    cid = obj.get("id")
    return cid if isinstance(cid, str) else None


def _where(path: Path, line_no: int | None, index: int | None, cid: str | None) -> str:
    at = f"{path}:{line_no}" if line_no is not None else f"{path}: cases[{index}]"
    return at + (f" (case {cid})" if cid else "")


def _check_reasons(
    case: LeanCase | CompareCase,
    path: Path,
    line_no: int | None = None,
    index: int | None = None,
) -> None:
    for name, score in case.metrics.items():
        if score.value is None and not score.reason:
            where = _where(path, line_no, index, case.id)
            raise ReportError(
                f"{where}: metrics/{name}: null without a reason (an undefined value must "
                "say why); is this an eval report written by `rag eval run`?"
            )


def typed_case(
    raw: bytes,
    path: Path,
    line_no: int | None = None,
    *,
    index: int | None = None,
    traces: bool = True,
) -> CaseResult:
    """The full :class:`CaseResult` of one case's JSON (``traces=False``: trace dropped
    before validation); any problem is a ReportError naming the line, case id and field."""
    cid = _case_id(raw)
    where = _where(path, line_no, index, cid)
    try:
        data = parse_json(raw.decode("utf-8"), where, what="report")
    except UnicodeDecodeError as exc:
        raise ReportError(
            f"{where}: not UTF-8 text (byte {exc.start}); re-save the report as UTF-8"
        ) from None
    except UnsafeInput as exc:
        raise ReportError(f"{exc}; is this an eval report?") from None
    if not isinstance(data, dict):
        raise ReportError(f"{where}: a case is a JSON object, got {type(data).__name__}")
    if not traces and "trace" in data:
        data["trace"] = None
    try:
        return CaseResult.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'/'.join(str(p) for p in e['loc']) or '<case>'}: {e['msg']}"
            + ("" if isinstance(e.get("input"), dict | list) else f" (got {e.get('input')!r:.60})")
            for e in exc.errors(include_url=False)[:5]
        )
        raise ReportError(f"{where}: not a valid case: {problems}") from None


def project(case: CaseResult, view: type[View] = LeanCase) -> View:
    """The lean view of a full case (its fields, converted: unknown ones ignored)."""
    return msgspec.convert(case.model_dump(exclude={"trace"}), type=view)


def decode_case(
    raw: bytes,
    path: Path,
    line_no: int | None = None,
    *,
    index: int | None = None,
    view: type[View] = LeanCase,
) -> View:
    """The lean view of one case's JSON. What the lean decoder refuses is validated by
    :class:`CaseResult` (trace dropped): accepted → projected, refused → its error."""
    try:
        case: View = _DECODERS[view].decode(raw)
    except _UNDECODABLE:
        return project(typed_case(raw, path, line_no, index=index, traces=False), view)
    _check_reasons(case, path, line_no, index)
    return case


def decode_lines(
    path: Path, lines: Iterable[tuple[int, bytes]], view: type[View] = LeanCase
) -> Iterator[tuple[int, View]]:
    """:func:`decode_case` of each ``(line number, case JSON)`` of :func:`line_report`,
    one at a time (nothing kept): ``(line number, view)``."""
    decode = _DECODERS[view].decode
    for line_no, raw in lines:
        try:
            case: View = decode(raw)
        except _UNDECODABLE:
            case = decode_case(raw, path, line_no, view=view)  # names the problem
        else:
            _check_reasons(case, path, line_no)
        yield line_no, case


# ---------------------------------------------------------------- the summary


def _summary(data: object, path: Path, where: str) -> ReportSummary:
    if not isinstance(data, dict):
        raise ReportError(f"{where}: a report is a JSON object")
    try:
        return ReportSummary.model_validate(data)
    except ValidationError as exc:
        from app.eval.report.io import schema_path

        raise ReportError(
            f"{where}: not a valid schema_version {SCHEMA_VERSION} report summary "
            f"(see {schema_path().name}); {validation_problems(exc)}"
        ) from None


def _head(path: Path, whole: bool = True) -> bytes | None:
    """The first line when it opens a line-layout report (``…,"cases":[``), else None.
    ``whole``: the file will be read whole (held in memory): refused over
    ``report_file_bytes``; streamed, each of its lines is held to ``report_line_bytes``."""
    check_file(path, max_bytes=_max_bytes() if whole else sys.maxsize, what="report")
    with open(path, "rb") as fh:
        if fh.read(len(_HEAD_START)) != _HEAD_START:
            return None  # another layout: never read a one-line document twice
        head = _HEAD_START + fh.readline(_line_bytes() + 1)
    if not head.endswith(b"\n"):
        return None
    head = head[:-1]
    return head if head.endswith(_CASES_OPEN) else None


def _head_summary(path: Path, head: bytes, lean: bool = False) -> ReportSummary | None:
    """The summary of a line-layout head; None when it is not schema version 2 JSON.
    ``lean``: without its per-case lists (``bad_cases``, ``sent_texts``: left empty)."""
    try:  # msgspec parses strict JSON as parse_json does, into the same objects, ≈ 3× faster
        data = msgspec.json.decode(head[: -len(_CASES_OPEN)] + b"}")
    except _UNDECODABLE:
        data = None  # NaN, a number out of range, bad UTF-8…: the path below names it
    if isinstance(data, dict):
        if data.get("schema_version") != SCHEMA_VERSION:
            return None
        if lean:
            data.update(bad_cases=[], sent_texts={})
        return _summary(data, path, f"{path}:1")
    try:
        text = head[: -len(_CASES_OPEN)].decode("utf-8") + "}"
        data = json.loads(text)  # strictness below (parse_json) once it is a report
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        return None
    try:
        data = parse_json(text, f"{path}:1", what="report")
    except UnsafeInput as exc:
        raise ReportError(f"{exc}; is this an eval report?") from None
    return _summary(data, path, f"{path}:1")


def _not_found(path: Path, exc: UnsafeInput) -> ReportError:
    if exc.problem == "not found":
        return ReportError(f"{path}: no such report; pass a reports/eval_*.json file")
    return ReportError(f"{exc}; is this an eval report?")


def _line_summary(path: Path, whole: bool = True) -> ReportSummary | None:
    """The summary of a report in the runner's line layout; None for any other layout."""
    try:
        head = _head(path, whole)
    except UnsafeInput as exc:
        raise _not_found(path, exc) from None
    return _head_summary(path, head) if head is not None else None


def read_summary(path: Path) -> ReportSummary:
    """The report's summary (everything but the cases) as a :class:`ReportSummary`."""
    path = Path(path)
    summary = _line_summary(path, whole=False)  # the first line only
    return summary if summary is not None else load_lean(path).summary


# ---------------------------------------------------------------- the cases


def _line_cases(path: Path, offsets: list[int] | None = None) -> Iterator[tuple[int, bytes]]:
    """``(line, case JSON)`` after the head line; the layout is checked as it goes (a
    comma after every case but the last, then ``]}`` and nothing but white space).
    ``offsets``: gets the byte offset in the file of each case line yielded."""
    most = _line_bytes()
    last = limit("report_cases") + 1  # the head line, then one line per case
    with open(path, "rb", buffering=_READ_BUFFER) as fh:
        end = len(fh.readline(most + 1))  # the offset just after the line read
        line_no = 1
        comma: bool | None = None  # did the previous case end with a comma (None: no case)
        ended = False
        for line in iter(partial(fh.readline, most + 1), b""):
            line_no += 1
            start, end = end, end + len(line)
            if offsets is not None:
                offsets.append(start)  # (a line that is not a case is taken back below)
            if line_no > last and not ended and line.rstrip(b"\r\n") != b"]}":
                raise ReportError(
                    f"{path}:{line_no}: more than {last - 1:,} cases, the limit for one report "
                    "(report_cases; limits: docs/limits.md); split the run into shards"
                )
            if len(line) > most and not line.endswith(b"\n"):
                raise ReportError(
                    f"{path}:{line_no}: this line is over the {most:,}-byte limit for one "
                    "line of a report (report_line_bytes; limits: docs/limits.md); is this "
                    "an eval report?"
                )
            if line.endswith(b",\n") and comma is not False and not ended:
                comma = True  # the usual line: what the checks below do with it, one copy
                yield line_no, line[:-2]
                continue
            body = line.rstrip(b"\r\n")
            if offsets is not None and (ended or body == b"]}" or (line_no == 2 and body == b"")):
                offsets.pop()  # not a case line
            if ended:
                if body.strip():
                    raise ReportError(f"{path}:{line_no}: text after the report's closing ]}}")
                continue
            if body == b"]}":
                if comma:
                    raise ReportError(f"{path}:{line_no - 1}: a comma after the last case")
                ended = True
            elif comma is False:
                raise ReportError(
                    f"{path}:{line_no - 1}: no comma after this case; is the file in the "
                    "one-case-per-line layout `rag eval run` writes? Re-write it with "
                    "`rag eval merge` or re-run"
                )
            elif line_no == 2 and body == b"":
                comma = None  # an empty case list: "[\n\n]}"
            elif body.endswith(b","):
                comma = True
                yield line_no, body[:-1]
            else:
                comma = False
                yield line_no, body
        if not ended:
            raise ReportError(
                f"{path}:{line_no}: the report ends before its closing ]}} (cut off while "
                "being written or copied?); re-run or re-copy it"
            )


def iter_case_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, case JSON bytes)`` of a line-layout report (see the module docstring);
    :class:`NotLineLayout` for a report in another layout (use :func:`load_lean`)."""
    return line_report(path)[1]


def line_report(
    path: Path, *, lean: bool = False, offsets: list[int] | None = None
) -> tuple[ReportSummary, Iterator[tuple[int, bytes]]]:
    """The summary of a line-layout report and :func:`iter_case_lines` of it (the summary
    parsed once); :class:`NotLineLayout` for a report in another layout. ``lean``: the
    summary without its per-case lists (``bad_cases`` and ``sent_texts`` empty: a reader
    that needs neither, such as ``rag eval compare``, does not hold 10,000s of them).
    ``offsets``: gets each case line's byte offset in the file as the cases are read (where
    :func:`read_case_at` finds it again)."""
    path = Path(path)
    try:
        head = _head(path, whole=False)
    except UnsafeInput as exc:
        raise _not_found(path, exc) from None
    summary = _head_summary(path, head, lean) if head is not None else None
    if summary is None:
        raise NotLineLayout(
            f"{path}: not in the one-case-per-line layout written by `rag eval run`; "
            "read it with load_lean / load_report"
        )
    return summary, _line_cases(path, offsets)


def read_case_at(path: Path, offset: int) -> tuple[bytes, int]:
    """The JSON of the case whose line starts at byte ``offset`` of a line-layout report
    (:func:`line_report`'s ``offsets``) and its line's length; the caller checks it is the
    case it expects (the file may have changed)."""
    most = _line_bytes()
    with open(path, "rb") as fh:
        fh.seek(offset)
        line = fh.readline(most + 1)
    body = line.rstrip(b"\r\n")
    return (body[:-1] if body.endswith(b",") else body), len(line)


def iter_cases(path: Path, view: type[View] = LeanCase) -> Iterator[View]:
    """The lean view of every case, in file order (streamed for a line-layout file)."""
    path = Path(path)
    try:
        lines = iter_case_lines(path)
    except NotLineLayout:
        yield from load_lean(path, view).cases
        return
    for line_no, raw in lines:
        yield decode_case(raw, path, line_no, view=view)


def _unique(cases: Sequence[LeanCase | CompareCase], path: Path, first_line: int | None) -> None:
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if case.id in seen:
            where = f"{path}:{first_line + i}" if first_line is not None else str(path)
            raise ReportError(
                f"{where}: case id {case.id!r} appears twice; ids must be unique "
                "(is this a concatenation of two reports? `rag eval merge` combines shards)"
            )
        seen.add(case.id)


def _document(path: Path, view: type[View]) -> LeanReport[View] | None:
    """Any schema-2 JSON layout, decoded as one document; None: not schema 2 (or not
    decodable: then :func:`load_report` reads it and names any problem)."""
    data = read_bytes(path, max_bytes=_max_bytes(), what="report")
    body = memoryview(data)[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        top = msgspec.json.decode(body, type=dict[str, msgspec.Raw])
        version = msgspec.json.decode(top.get("schema_version", b"null"))
    except _UNDECODABLE:
        return None
    if version != SCHEMA_VERSION:
        return None
    raw_cases = top.pop("cases", None)
    if raw_cases is None:
        return None  # load_report says what is missing
    try:
        text = "{" + ",".join(f"{json.dumps(k)}:{bytes(v).decode()}" for k, v in top.items())
        summary = _summary(parse_json(text + "}", path, what="report"), path, str(path))
    except (UnsafeInput, UnicodeDecodeError):
        return None
    del top
    try:  # one decode of the whole array; on any problem case by case, naming the case
        cases: list[View] = _LIST_DECODERS[view].decode(raw_cases)
        for i, case in enumerate(cases):
            _check_reasons(case, path, None, i)
    except _UNDECODABLE:
        try:
            items = msgspec.json.decode(raw_cases, type=list[msgspec.Raw])
        except _UNDECODABLE:
            return None
        cases = [decode_case(bytes(r), path, index=i, view=view) for i, r in enumerate(items)]
    del raw_cases, body, data
    _unique(cases, path, None)
    return LeanReport(path=path, summary=summary, cases=cases, layout="document")


def load_lean(path: Path, view: type[View] = LeanCase) -> LeanReport[View]:
    """The report's summary and lean cases (``view``: :class:`LeanCase`, or the smaller
    :class:`CompareCase`), whatever its layout (module docstring)."""
    path = Path(path)
    summary = _line_summary(path)
    if summary is not None:
        cases = [decode_case(raw, path, n, view=view) for n, raw in _line_cases(path)]
        _unique(cases, path, 2)
        return LeanReport(path=path, summary=summary, cases=cases, layout="lines")
    try:
        lean = _document(path, view)
    except UnsafeInput as exc:
        raise _not_found(path, exc) from None
    if lean is not None:
        return lean
    from app.eval.report.io import load_report

    report = load_report(path, traces=False)
    summary = ReportSummary.model_validate(
        {name: getattr(report, name) for name in ReportSummary.model_fields}
    )
    return LeanReport(
        path=path, summary=summary, cases=[project(c, view) for c in report.cases], layout="typed"
    )
