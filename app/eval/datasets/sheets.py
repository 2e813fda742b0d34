"""Spreadsheets: ``rag datasets export SUITE --csv|--xlsx`` and ``rag datasets import FILE``.

One row per case, one column per field (the header row names the fields). A cell holds:

* a text as it is; an empty cell means "field left out";
* a list (``acl``, ``tags``, ``golden_chunk_ids``, ``must_include``, …) as items separated by
  ``;`` (export writes ``; ``); import reads every form the editor takes — ``；`` ``，`` ``、``
  ``,`` or line breaks, a JSON list (:func:`app.eval.datasets.items.parse_items`); ``[]`` is an
  empty list that is present;
* ``history`` as one turn per line, ``user: …`` / ``assistant: …``;
* ``expected_refusal`` as ``true`` / ``false`` (import also takes ``是`` / ``否``), ``version``
  as a whole number.

Where a value cannot be written that way without loss (an item holding a separator, a turn
holding a line break) the cell holds the JSON array instead, which import reads back. So the round trip
loses nothing: importing an export gives the same JSONL bytes for every shipped suite. An
import is checked like ``rag datasets check`` (hints in the cell format) and every problem,
warnings included, names the row and column, in the language of the run.
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
from app.eval.datasets.hints import hint, label
from app.eval.datasets.items import LIST_FIELDS, parse_items
from app.eval.datasets.messages import Lang, resolve_lang, say
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
    "anchors",  # last: written by `rag datasets anchor`, not by people
)
assert set(COLUMNS) == set(CASE_FIELDS)
#: columns an export adds for people and an import ignores: the passage each golden label
#: points at (``chunk id: heading › quote…``, one per line, from the case's anchors)
SHOWN_ONLY: tuple[str, ...] = ("golden_passages",)
LISTS = frozenset(LIST_FIELDS)
_TURN = re.compile(r"^(user|assistant)\s*[:：] ?(.*)$", re.S)


@dataclass(frozen=True)
class SheetIssue:
    row: int  # 1-based spreadsheet row (the header is row 1)
    column: str  # field name, with its letter
    message: str
    severity: str = "error"
    lang: Lang = "en"

    def format(self, file: str) -> str:
        where = say("sheet.where", self.lang, row=self.row, column=self.column)
        warn = say("warning", self.lang) if self.severity == "warning" else ""
        colon = "：" if self.lang == "zh" else ": "
        return f"{file}{colon}{where}{colon}{warn}{self.message}"


def _column(letter: str, field: str, lang: Lang) -> str:
    return say("sheet.column", lang, letter=letter, field=label(field, lang))


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
        joined = "; ".join(items)
        plain = items and parse_items(joined) == items  # import reads it back as it was
        return joined if plain else json.dumps(value, ensure_ascii=False)
    if name == "history":
        lines = [f"{t['role']}: {t['content']}" for t in value]
        plain = value and all("\n" not in t["content"] and "\r" not in t["content"] for t in value)
        return "\n".join(lines) if plain else json.dumps(value, ensure_ascii=False)
    if name == "expected_refusal":
        return "true" if value else "false"
    if name == "anchors":
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _passages(data: dict[str, Any]) -> str:
    anchors = data.get("anchors") or {}
    lines = []
    for cid in data.get("golden_chunk_ids") or []:
        a = anchors.get(cid)
        if a is not None:
            lines.append(f"{cid}: {' › '.join(a['heading'])} › {a['quote']}…")
    return "\n".join(lines)


def export_rows(suite: Suite) -> list[list[Any]]:
    """The header row and one row per case of ``suite`` (cells as strings)."""
    rows: list[list[Any]] = [[*COLUMNS, *SHOWN_ONLY]]
    for case in suite.cases:
        data = case.model_dump(exclude_unset=True)
        rows.append(["" if n not in data else _cell(n, data[n]) for n in COLUMNS])
        rows[-1].append(_passages(data))
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
    for c, name in enumerate((*COLUMNS, *SHOWN_ONLY), start=1):
        ws.column_dimensions[_letter(c - 1)].width = (
            40 if name in {"question", "golden_answer", "history", "golden_passages"} else 18
        )
    help_ws = wb.create_sheet("help")
    code: Lang = "zh" if lang == "zh" else "en"
    help_ws.append(
        ["field", "what it holds, in a cell"] if code == "en" else ["字段", "单元格里怎么写"]
    )
    for name in (*COLUMNS, *SHOWN_ONLY):
        help_ws.append([label(name, code), hint(name, code, "sheet")])
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


_TRUE = {"true", "是", "真", "yes"}
_FALSE = {"false", "否", "假", "no"}


def _parse(name: str, raw: str, row: int, col: str, issues: list[SheetIssue], lang: Lang) -> Any:
    """The field's value from its cell text (raises nothing; appends to ``issues``)."""

    def problem(key: str, **values: object) -> None:
        text = say(key, lang, **values) + say("sep", lang) + hint(name, lang, "sheet")
        issues.append(SheetIssue(row, col, text, lang=lang))

    if name in LISTS:
        return parse_items(raw)
    if name == "history":
        if raw.lstrip().startswith("["):
            try:
                return json.loads(raw)
            except json.JSONDecodeError as exc:
                problem("sheet.json-list", msg=exc.msg)
                return None
        turns = []
        for n, line in enumerate(raw.splitlines(), start=1):
            m = _TURN.match(line)
            if m is None:
                problem("sheet.turn", n=n)
                return None
            turns.append({"role": m.group(1), "content": m.group(2)})
        return turns
    if name == "expected_refusal":
        low = raw.strip().lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        problem("sheet.bool", value=repr(raw))
        return None
    if name == "anchors":
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            problem("sheet.json-list", msg=str(exc)[:60])
            return None
    if name == "version":
        if raw.strip().isdigit():
            return int(raw.strip())
        problem("sheet.int", value=repr(raw))
        return None
    return raw


def read_sheet(
    path: Path, *, lang: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, str], list[SheetIssue]]:
    """The cases of a sheet (one per non-empty row), each field's column letter, and the cell
    problems found (in ``lang``)."""
    code = resolve_lang(lang)
    rows = _raw_rows(path)
    issues: list[SheetIssue] = []
    if not rows:
        raise DatasetError(f"{path}: the sheet is empty — the first row must name the fields")
    header = [_text(h).strip() for h in rows[0]]
    columns: list[tuple[int, str]] = []
    for i, name in enumerate(header):
        if not name:
            continue
        where = _column(_letter(i), name, code)
        if name in SHOWN_ONLY:
            continue  # shown for people, derived from the anchors: never read back
        if name not in COLUMNS:
            text = say("sheet.unknown-column", code, name=repr(name), known=", ".join(COLUMNS))
            issues.append(SheetIssue(1, where, text, lang=code))
        elif name in [n for _, n in columns]:
            issues.append(SheetIssue(1, where, say("sheet.two-columns", code), lang=code))
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
            value = _parse(name, raw, r, _column(_letter(i), name, code), issues, code)
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
        place="sheet",
    )
    code = result.lang
    issues = []
    for issue in result.issues:
        row = int(cases[issue.line - 1]["__row__"]) if issue.line else 1
        field = issue.field.split("[", 1)[0].split(".", 1)[0]
        column = (
            _column(letters[field], issue.field, code)
            if field in letters
            else label(issue.field, code) or "-"
        )
        message = f"{issue.message}{say('sep', code)}{issue.fix}"
        issues.append(SheetIssue(row, column, message, issue.severity, code))
    return text, issues
