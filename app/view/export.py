"""The viewer's pages as static files: ``rag report html RUN`` and
``rag eval compare A B --format html``.

``OUT.html`` is the run page (summary, verdicts, distributions, rendered here); the folder
``OUT_cases/`` beside it holds what its case table and its cases are drawn from in the
browser — no page per case, nothing inlined 10,000 times::

    rows-<n>.js    the table's compact rows, 2,500 per file (view.js filters and sorts all)
    c-<n>.js       the cases' data, 100 per file: each case's JSON as in the report + extras
    case.html      one case page for all: case.html#<n>/<case id> reads c-<n>.js (case.js)
    run.js         the run's header for the case page; view.css, view.js, case.js

Data files are scripts that put their JSON on ``window`` (JSON is a JS expression; see
:func:`_data`), since a page opened from disk cannot ``fetch()`` a file: the set works opened from disk or
uploaded as a CI artifact. The folder is written beside the old one and swapped in with
one rename (the set is refreshed as a whole, no fsync per file); the run page is written
atomically after it.

A compare still writes one side-by-side page per paired case (``OUT_cases/<id>.html``).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec

from app.errors import UserError
from app.eval.report.records import Report
from app.view import pages
from app.view.casedata import Extras, case_row, run_info
from app.view.model import case_file_name
from app.view.pages import static_assets
from app.view.stream import StreamedReport
from app.wellformed import clean, clean_data

if TYPE_CHECKING:
    from app.eval.compare import Comparison

CASES_PER_FILE = 100
ROWS_PER_FILE = 2500
_OURS = re.compile(r"^(?:c-\d+\.js|rows-\d+\.js|run\.js|[^/]*\.html)$")

__all__ = ["export_compare", "export_run"]


def _case_dir(out: Path) -> Path:
    return out.with_name(out.stem + "_cases")


def _write_folder(folder: Path, pages: Iterable[tuple[str, str | bytes]]) -> list[Path]:
    """Write ``(file name, text)`` files and the shared ``view.css`` / ``view.js`` / ``case.js`` into a new
    folder beside ``folder``, then swap it in: the set is replaced as a whole (one rename), so
    a reader never sees a half-written set and nothing is fsynced per page."""
    parent = folder.parent
    parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():  # replaced whole: only if it holds nothing but pages we write
        foreign = sorted(
            p.name
            for p in folder.iterdir()
            if not (p.is_file() and (_OURS.match(p.name) or p.name in static_assets()))
        )
        if foreign or not folder.is_dir():
            raise UserError(
                f"{folder}: holds files the viewer did not write ({', '.join(foreign[:3])}…); "
                "choose another -o/--out, or move them"
            )
    fresh = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    try:
        written = []
        for name, text in pages:
            path = fresh / name
            # text that is not valid Unicode is written as U+FFFD (app/wellformed.py)
            path.write_bytes(text if isinstance(text, bytes) else clean(text).encode("utf-8"))
            written.append(folder / name)
        for name, text in static_assets().items():
            (fresh / name).write_text(text, encoding="utf-8")
        fresh.chmod(0o755)
        old = None
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=parent))
            folder.rename(old / folder.name)
        fresh.rename(folder)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return written


_MSGSPEC = msgspec.json.Encoder().encode


def _encode(value: Any) -> bytes:
    """Compact UTF-8 JSON of the rows and extras; text that is not valid Unicode (a report
    holding ``\\ud800``) is written as U+FFFD (:mod:`app.wellformed`)."""
    try:
        return _MSGSPEC(value)
    except UnicodeEncodeError:
        return _MSGSPEC(clean_data(msgspec.to_builtins(value))[0])


def _data(target: str, json_text: bytes) -> bytes:
    """A data file: ``target`` (a JS assignment or call) applied to the JSON as a JS
    expression — JSON is valid JavaScript (ES2019): arrays and objects whose text is data,
    never code. JSON holding the key ``__proto__`` (which a JS object literal would take
    as the object's prototype) is carried as a string instead, JSON.parse'd by the page."""
    if b'"__proto__"' in json_text:
        json_text = json.dumps(json_text.decode("utf-8"), ensure_ascii=False).encode("utf-8")
    return target.replace("@", "%s").encode("utf-8") % json_text + b";\n"


def export_run(report: StreamedReport, out: Path) -> list[Path]:
    """Write the run page and the folder its table and case page read; returns the files
    written (the run page first). The cases are written as they are read (a line-layout
    report is streamed: memory is one data file's cases and rows, whatever the run's size)."""
    from app.safe_io import atomic_write_text
    from app.view.casedata import RowFacts
    from app.view.pages import case_shell, run_page_of

    folder = _case_dir(out)
    summary = report.summary
    extras = Extras(summary)
    facts = RowFacts()
    metrics = list(summary.metrics)
    url = quote(folder.name)

    def rows_file(k: int, rows: list[dict[str, Any]]) -> tuple[str, bytes]:
        target = "(window.RAG_ROWS = window.RAG_ROWS || []).push(@)"
        return f"rows-{k}.js", _data(target, _encode(rows))

    def cases_file(n: int, part: list[bytes]) -> tuple[str, bytes]:
        target = f"(window.RAG_CASES = window.RAG_CASES || {{}})[{n}] = @"
        return f"c-{n}.js", _data(target, b"[" + b",".join(part) + b"]")

    def files() -> Iterator[tuple[str, str | bytes]]:
        part: list[bytes] = []
        rows: list[dict[str, Any]] = []
        i = -1
        for i, case in enumerate(report.cases):
            n, cid = i // CASES_PER_FILE, case.lean.id
            href = f"{url}/case.html#{n}/{quote(cid, safe='')}"
            row = case_row(case.lean, case.trace, href, extras.bad.get(cid), metrics)
            facts.add(row)
            rows.append(row)
            x = _encode(extras.of(cid, case.trace))
            part.append(b'{"c":' + case.raw + b',"x":' + x + b"}")
            if len(part) == CASES_PER_FILE:
                yield cases_file(n, part)
                part = []
            if len(rows) == ROWS_PER_FILE:
                yield rows_file(i // ROWS_PER_FILE, rows)
                rows = []
        if part:
            yield cases_file(i // CASES_PER_FILE, part)
        if rows or i < 0:  # an empty run: one empty rows file, as the page expects one
            yield rows_file(max(i, 0) // ROWS_PER_FILE, rows)
        info = _encode(run_info(summary, f"../{quote(out.name)}"))
        yield "run.js", _data("window.RAG_RUN = @", info)
        yield "case.html", case_shell(summary, f"../{quote(out.name)}", "./", facts.lang)

    written = _write_folder(folder, files())
    row_files = [f"{url}/{p.name}" for p in written if p.name.startswith("rows-")]
    atomic_write_text(out, run_page_of(summary, (), rows_src=row_files, facts=facts))
    return [out, *written]


def export_compare(base: Report, new: Report, comparison: Comparison, out: Path) -> list[Path]:
    """Write the compare page and one side-by-side page per paired case."""
    from app.safe_io import atomic_write_text

    folder = _case_dir(out)
    olds = {c.id: c for c in base.cases}
    pairs = {c.id: (olds[c.id], c) for c in new.cases if c.id in olds}
    names = {cid: case_file_name(cid) for cid in pairs}

    def side_by_side() -> Iterator[tuple[str, str]]:
        for cid, name in names.items():
            html = pages.compare_case_page(
                base, new, cid, back=f"../{out.name}", base_case_href="", new_case_href="",
                pair=pairs[cid], assets="./",
            )  # fmt: skip
            assert html is not None
            yield name, html

    written = _write_folder(folder, side_by_side())
    href = {k: f"{folder.name}/{v}" for k, v in names.items()}
    atomic_write_text(out, pages.compare_page(base, new, comparison, href, "", ""))
    return [out, *written]
