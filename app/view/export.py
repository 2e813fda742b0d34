"""The viewer's pages as static files: ``rag report html RUN`` and
``rag eval compare A B --format html``.

``OUT.html`` is the run (or compare) page; each case has its own page in the folder
``OUT_cases/`` beside it, linked relatively, so the set works opened from disk or uploaded
as a CI artifact. The case pages link one ``view.css`` / ``view.js`` in their folder (not
inlined 10,000 times); the folder is written beside the old one and swapped in with one
rename (the set is refreshed as a whole, no fsync per page); the run page is written
atomically after it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from app.errors import UserError
from app.eval.compare import Comparison
from app.eval.records import Report
from app.view import pages
from app.view.model import case_file_name
from app.view.pages import static_assets

__all__ = ["export_compare", "export_run"]


def _case_dir(out: Path) -> Path:
    return out.with_name(out.stem + "_cases")


def _write_folder(folder: Path, pages: Iterable[tuple[str, str]]) -> list[Path]:
    """Write ``(file name, text)`` pages and the shared ``view.css`` / ``view.js`` into a new
    folder beside ``folder``, then swap it in: the set is replaced as a whole (one rename), so
    a reader never sees a half-written set and nothing is fsynced per page."""
    parent = folder.parent
    parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():  # replaced whole: only if it holds nothing but pages we write
        foreign = sorted(
            p.name
            for p in folder.iterdir()
            if not (p.is_file() and (p.suffix == ".html" or p.name in static_assets()))
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
            path.write_text(text, encoding="utf-8")
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


def export_run(report: Report, out: Path) -> list[Path]:
    """Write the run page and one page per case; returns the files written."""
    from app.eval.report import atomic_write_text

    folder = _case_dir(out)
    names = {c.id: case_file_name(c.id) for c in report.cases}
    written = _write_folder(
        folder,
        ((names[cid], html) for cid, html in pages.case_pages(report, f"../{out.name}", "./")),
    )
    atomic_write_text(out, pages.run_page(report, {k: f"{folder.name}/{v}" for k, v in names.items()}))  # fmt: skip
    return [out, *written]


def export_compare(base: Report, new: Report, comparison: Comparison, out: Path) -> list[Path]:
    """Write the compare page and one side-by-side page per paired case."""
    from app.eval.report import atomic_write_text

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
