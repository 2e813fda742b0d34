"""A report file read case by case for the static export (``rag report html``).

A run writes its report in the line layout of :func:`app.eval.report.report_chunks`::

    {<summary>,"cases":[
    <case>,
    <case>
    ]}

:func:`read_cases` validates the summary with the typed :class:`ReportSummary` and each
case line with :class:`~app.view.casedata.LeanCase` (the fields the pages compute with;
the rest of the case is drawn as data by ``static/case.js``), checks the report-wide rules
(unique ids, every sent text present) and yields each case's JSON text as written — no
re-serialisation. A schema 2 file in another layout (one line, indented) is parsed whole and
checked the same way; schema version 1 is read (converted) by
:func:`app.eval.report.load_report`, the full typed reader.
Every problem is a :class:`~app.errors.ReportError` naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from app.errors import ReportError
from app.eval.records import ReportSummary
from app.view.casedata import LeanCase

__all__ = ["StreamedReport", "read_cases"]

_OPEN = b',"cases":['
_CLOSE = b"]}"


@dataclass
class StreamedReport:
    summary: ReportSummary
    cases: list[tuple[str, LeanCase]]  # (the case's JSON text, its lean view), in file order


def _problems(exc: ValidationError) -> str:
    from app.eval.report import validation_problems

    return validation_problems(exc)


def _finite(raw: bytes) -> bool:
    """No NaN / Infinity outside strings (a report refuses them; JSON has no such value)."""
    from app.safe_io import UnsafeInput, parse_json

    try:
        parse_json(raw.decode("utf-8", "replace"), "case")
    except UnsafeInput:
        return False
    return True


def _line_layout(path: Path, data: bytes) -> StreamedReport | None:
    """The report in the line layout, or ``None`` when the file is not in it (the caller
    falls back to the full reader, which names the problem)."""
    head_end = data.find(b"\n")
    if head_end < 0 or not data[:head_end].endswith(_OPEN):
        return None
    body = data[head_end + 1 :].rstrip(b"\n")
    if not body.endswith(_CLOSE):
        return None
    head = data[: head_end - len(_OPEN)] + b"}"
    try:
        summary = ReportSummary.model_validate_json(head)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            return None
        raise ReportError(f"{path}:1: not a valid report summary; {_problems(exc)}") from None
    lines = body[: -len(_CLOSE)].split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    cases: list[tuple[str, LeanCase]] = []
    seen: set[str] = set()
    texts = summary.sent_texts
    last = len(lines) + 1  # the file's line number of the last case
    for n, line in enumerate(lines, start=2):
        if n < last and not line.endswith(b","):  # every case line but the last ends with ,
            return None
        raw = line[:-1] if n < last else line
        if (b"NaN" in raw or b"Infinity" in raw) and not _finite(raw):
            raise ReportError(
                f"{path}:{n}: case {n - 1} holds NaN or Infinity, which are not JSON; "
                "write a finite number or null with a reason"
            )
        try:
            case = LeanCase.model_validate_json(raw)
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                return None  # not one case per line after all: the full reader decides
            raise ReportError(f"{path}:{n}: case {n - 1} is not valid; {_problems(exc)}") from None
        _check_case(path, str(n), case, seen, texts)
        cases.append((raw.decode("utf-8"), case))
    return StreamedReport(summary, cases)


def _check_case(path: Path, where: str, case: LeanCase, seen: set[str], texts: dict[str, str]) -> None:  # fmt: skip
    """The report-wide rules :class:`~app.eval.records.Report` checks: unique ids, every
    sent text of a message without ``content`` in ``sent_texts``."""
    if case.id in seen:
        raise ReportError(f"{path}:{where}: case id {case.id!r} appears twice; ids must be unique")
    seen.add(case.id)
    for m in case.trace.sent if case.trace else ():
        if m.content is None and m.sha256 not in texts:
            raise ReportError(
                f"{path}:{where}: case {case.id}: sent {m.role} message {m.sha256[:12]}… is "
                "not in sent_texts (a report keeps every sent text once)"
            )


def _parsed(path: Path, data: object) -> StreamedReport | None:
    """A schema 2 report in any other layout, parsed whole; ``None`` for anything else
    (schema 1, not an object: :func:`app.eval.report.load_report` converts or refuses)."""
    import json

    if not isinstance(data, dict) or data.get("schema_version") != "2":
        return None
    cases = data.pop("cases", None)
    if not isinstance(cases, list):
        return None
    try:
        summary = ReportSummary.model_validate(data)
    except ValidationError as exc:
        raise ReportError(f"{path}: not a valid report summary; {_problems(exc)}") from None
    out: list[tuple[str, LeanCase]] = []
    seen: set[str] = set()
    for i, raw in enumerate(cases):
        cid = raw.get("id") if isinstance(raw, dict) else None
        where = f"cases[{i}]" + (f" ({cid})" if isinstance(cid, str) else "")
        try:
            case = LeanCase.model_validate(raw)
        except ValidationError as exc:
            raise ReportError(f"{path}: {where} is not a valid case; {_problems(exc)}") from None
        _check_case(path, where, case, seen, summary.sent_texts)
        out.append((json.dumps(raw, ensure_ascii=False, separators=(",", ":")), case))
    return StreamedReport(summary, out)


def read_cases(path: Path) -> StreamedReport:
    """The summary and cases of the report at ``path`` (see the module docstring)."""
    from app.eval.report import load_report
    from app.limits import limit
    from app.safe_io import UnsafeInput, decode, parse_json, read_bytes

    try:
        data = read_bytes(path, max_bytes=limit("report_file_bytes"), what="report")
    except UnsafeInput as exc:
        if exc.problem == "not found":
            raise ReportError(f"{path}: no such report; pass a reports/eval_*.json file") from None
        raise ReportError(f"{exc}; is this an eval report?") from None
    try:
        streamed = _line_layout(path, data)
    except UnicodeDecodeError:
        streamed = None
    if streamed is not None:
        return streamed
    try:
        parsed = parse_json(decode(data, path).removeprefix("\ufeff"), path, what="report")
    except UnsafeInput as exc:
        raise ReportError(f"{exc}; is this an eval report?") from None
    del data
    streamed = _parsed(path, parsed)
    if streamed is not None:
        return streamed
    del parsed
    report = load_report(path)  # schema 1 (converted) or a refusal naming the problem
    cases = []
    for case in report.cases:
        text = case.model_dump_json()
        cases.append((text, LeanCase.model_validate_json(text)))
    return StreamedReport(report, cases)  # a Report is a ReportSummary with its cases
