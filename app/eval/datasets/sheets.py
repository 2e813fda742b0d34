"""Spreadsheets: ``rag datasets export SUITE --csv|--xlsx`` and ``rag datasets import FILE``.

One row per case, one column per field (the header row names the fields). A cell holds:

* a text as it is; an empty cell means "field left out";
* a list (``acl``, ``tags``, ``golden_chunk_ids``, ``must_include``, …) as items separated by
  ``;`` or ``；`` (export writes ``; ``); ``[]`` is an empty list that is present;
* ``history`` as one turn per line, ``user: …`` / ``assistant: …``;
* ``expected_refusal`` as ``true`` / ``false``, ``version`` as a whole number.

Where a value cannot be written that way without loss (an item holding ``;``, a turn holding a
line break) the cell holds the JSON array instead, which import reads back. So the round trip
loses nothing: importing an export gives the same JSONL bytes for every shipped suite. An
import is checked like ``rag datasets check`` and every problem names the row and column.
CSV is written as UTF-8 with a BOM (so Excel shows Chinese); import accepts either. A CSV
cell that a spreadsheet would run as a formula (it starts with ``= + - @``, a tab or a CR: CSV
injection) is written with a leading ``'``, which import takes off again (:func:`guard_cell`);
XLSX cells are typed as text instead.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import DatasetError
from app.eval.datasets.case import CASE_FIELDS, Suite
from app.eval.datasets.check import check_text
from app.eval.datasets.messages import FIELD_HINTS
from app.retrieval.kb import KnowledgeBase

__all__ = ["COLUMNS", "SheetIssue", "export_rows", "read_sheet", "rows_to_jsonl", "write_sheet"]

# the order the shipped files use; a case's keys are written in this order
COLUMNS: tuple[str, ...] = (
    "id",
    "question",
    "history",
    "golden_rewrite",
    "golden_answer",
    "golden_chunk_ids",
    "acceptable_chunk_ids",
    "must_include",
    "must_not_include",
    "acl",
    "expected_refusal",
    "tags",
    "difficulty",
    "annotator",
    "annotated_at",
    "reviewed_by",
    "version",
)
assert set(COLUMNS) == set(CASE_FIELDS)
LISTS = {
    "golden_chunk_ids",
    "acceptable_chunk_ids",
    "must_include",
    "must_not_include",
    "acl",
    "tags",
}
_SPLIT = re.compile(r"[;；]")
_TURN = re.compile(r"^(user|assistant)\s*[:：] ?(.*)$", re.S)


@dataclass(frozen=True)
class SheetIssue:
    row: int  # 1-based spreadsheet row (the header is row 1)
    column: str  # field name, with its letter
    message: str
    severity: str = "error"

    def format(self, file: str) -> str:
        return f"{file}: row {self.row}, column {self.column}: {self.message}"


def _letter(index: int) -> str:
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out


# ---------------------------------------------------------------------- export
def _cell(name: str, value: Any) -> Any:
    if name in LISTS:
        items = [str(v) for v in value]
        plain = items and all(v == v.strip() and v and not _SPLIT.search(v) for v in items)
        return "; ".join(items) if plain else json.dumps(value, ensure_ascii=False)
    if name == "history":
        lines = [f"{t['role']}: {t['content']}" for t in value]
        plain = value and all("\n" not in t["content"] and "\r" not in t["content"] for t in value)
        return "\n".join(lines) if plain else json.dumps(value, ensure_ascii=False)
    if name == "expected_refusal":
        return "true" if value else "false"
    return str(value)


def export_rows(suite: Suite) -> list[list[Any]]:
    """The header row and one row per case of ``suite`` (cells as strings)."""
    rows: list[list[Any]] = [list(COLUMNS)]
    for case in suite.cases:
        data = case.model_dump(exclude_unset=True)
        rows.append(["" if n not in data else _cell(n, data[n]) for n in COLUMNS])
    return rows


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _needs_guard(text: str) -> bool:
    """A formula start, or ``'`` before one (so that the guard stays reversible)."""
    return text.startswith(_FORMULA_START) or (text.startswith("'") and _needs_guard(text[1:]))


def guard_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run as a formula: ``'`` before a formula start."""
    return "'" + value if isinstance(value, str) and _needs_guard(value) else value


def unguard_cell(value: str) -> str:
    """The inverse of :func:`guard_cell` for a cell read from a CSV file."""
    return value[1:] if value.startswith("'") and _needs_guard(value[1:]) else value


def write_sheet(rows: list[list[Any]], path: Path, kind: str, *, lang: str = "en") -> None:
    """Write ``rows`` as CSV (UTF-8 with BOM) or XLSX (every cell a text cell)."""
    if kind == "csv":
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerows([guard_cell(v) for v in r] for r in rows)
        path.write_text(buf.getvalue(), encoding="utf-8-sig", newline="")
        return
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font

    wb = Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = "cases"
    for r, row in enumerate(rows, start=1):
        for c, value in enumerate(row, start=1):
            cell = ws.cell(row=r, column=c)
            cell.value = value
            cell.data_type = "s"  # a text starting with "=" stays a text, never a formula
            cell.alignment = Alignment(wrap_text=True, vertical="top")
            if r == 1:
                cell.font = Font(bold=True)
    ws.freeze_panes = "B2"
    for c, name in enumerate(COLUMNS, start=1):
        ws.column_dimensions[_letter(c - 1)].width = (
            40 if name in {"question", "golden_answer", "history"} else 18
        )
    help_ws = wb.create_sheet("help")
    help_ws.append(["field", "what it holds" if lang != "zh" else "含义"])
    for name in COLUMNS:
        en, zh = FIELD_HINTS[name]
        help_ws.append([name, zh if lang == "zh" else en])
    wb.save(path)


# ---------------------------------------------------------------------- import
def _raw_rows(path: Path) -> list[list[Any]]:
    if path.suffix.lower() == ".xlsx":
        from openpyxl import load_workbook

        try:
            wb = load_workbook(path, read_only=True, data_only=True)
        except Exception as exc:  # openpyxl raises many kinds for a file that is not xlsx
            raise DatasetError(
                f"{path}: not a readable .xlsx workbook ({type(exc).__name__})"
            ) from None
        ws = wb["cases"] if "cases" in wb.sheetnames else wb.worksheets[0]
        rows = [list(r) for r in ws.iter_rows(values_only=True)]
        wb.close()
        return rows
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not UTF-8 text — save the sheet as 'CSV UTF-8'") from None
    return [[unguard_cell(v) for v in r] for r in csv.reader(io.StringIO(text, newline=""))]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date):  # a spreadsheet turned a date text into a date
        return value.strftime("%Y-%m-%d")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _parse(name: str, raw: str, row: int, col: str, issues: list[SheetIssue]) -> Any:
    """The field's value from its cell text (raises nothing; appends to ``issues``)."""
    if name in LISTS or name == "history":
        if raw.lstrip().startswith("["):
            try:
                return json.loads(raw)
            except json.JSONDecodeError as exc:
                issues.append(SheetIssue(row, col, f"not a valid JSON list ({exc.msg})"))
                return None
        if name == "history":
            turns = []
            for n, line in enumerate(raw.splitlines(), start=1):
                m = _TURN.match(line)
                if m is None:
                    issues.append(
                        SheetIssue(
                            row,
                            col,
                            f'line {n} of the cell does not start with "user:" or "assistant:"',
                        )
                    )
                    return None
                turns.append({"role": m.group(1), "content": m.group(2)})
            return turns
        return [item.strip() for item in _SPLIT.split(raw) if item.strip()]
    if name == "expected_refusal":
        low = raw.strip().lower()
        if low in {"true", "false"}:
            return low == "true"
        issues.append(SheetIssue(row, col, f"{raw!r} is not true or false"))
        return None
    if name == "version":
        if raw.strip().isdigit():
            return int(raw.strip())
        issues.append(SheetIssue(row, col, f"{raw!r} is not a whole number"))
        return None
    return raw


def read_sheet(path: Path) -> tuple[list[dict[str, Any]], dict[str, str], list[SheetIssue]]:
    """The cases of a sheet (one per non-empty row), each field's column letter, and the cell
    problems found."""
    rows = _raw_rows(path)
    issues: list[SheetIssue] = []
    if not rows:
        raise DatasetError(f"{path}: the sheet is empty — the first row must name the fields")
    header = [_text(h).strip() for h in rows[0]]
    columns: list[tuple[int, str]] = []
    for i, name in enumerate(header):
        if not name:
            continue
        if name not in COLUMNS:
            issues.append(
                SheetIssue(1, f"{_letter(i)} ({name})", f"unknown field {name!r} in the header")
            )
        elif name in [n for _, n in columns]:
            issues.append(SheetIssue(1, f"{_letter(i)} ({name})", "this field has two columns"))
        else:
            columns.append((i, name))
    cases: list[dict[str, Any]] = []
    for r, row in enumerate(rows[1:], start=2):
        cells = {name: _text(row[i]) if i < len(row) else "" for i, name in columns}
        if not any(v.strip() for v in cells.values()):
            continue  # an empty row
        case: dict[str, Any] = {}
        for name in COLUMNS:
            raw = cells.get(name, "")
            if raw == "":
                continue
            i = next(i for i, n in columns if n == name)
            value = _parse(name, raw, r, f"{_letter(i)} ({name})", issues)
            if value is not None:
                case[name] = value
        case["__row__"] = r
        cases.append(case)
    return cases, {name: _letter(i) for i, name in columns}, issues


def rows_to_jsonl(
    cases: Sequence[dict[str, Any]],
    *,
    suite: str,
    file: str,
    kb: KnowledgeBase | None,
    letters: dict[str, str],
    other_ids: dict[str, tuple[str, str]] | None = None,
    lang: str | None = None,
) -> tuple[str, list[SheetIssue]]:
    """The JSONL text of ``cases`` and the checker's problems, named by row and column."""
    clean = [{k: v for k, v in c.items() if k != "__row__"} for c in cases]
    text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in clean)
    result = check_text(
        "".join(json.dumps(c) + "\n" for c in clean),
        suite=suite,
        file=file,
        kb=kb,
        lang=lang,
        other_ids=other_ids,
    )
    issues = []
    for issue in result.issues:
        row = int(cases[issue.line - 1]["__row__"]) if issue.line else 1
        field = issue.field.split("[", 1)[0].split(".", 1)[0]
        column = f"{letters[field]} ({issue.field})" if field in letters else issue.field or "-"
        issues.append(SheetIssue(row, column, f"{issue.message} — {issue.fix}", issue.severity))
    return text, issues
