"""The viewer's pages as static files: ``rag report html RUN`` and
``rag eval compare A B --format html``.

``OUT.html`` is the run (or compare) page; each case has its own page in the folder
``OUT_cases/`` beside it, linked relatively, so the set works opened from disk or uploaded
as a CI artifact. Files are written atomically; the case folder is refreshed as a whole.
"""

from __future__ import annotations

from pathlib import Path

from app.eval.compare import Comparison
from app.eval.records import Report
from app.view import pages
from app.view.model import case_file_name

__all__ = ["export_compare", "export_run"]


def _case_dir(out: Path) -> Path:
    return out.with_name(out.stem + "_cases")


def _clear(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.html"):
        old.unlink()


def export_run(report: Report, out: Path) -> list[Path]:
    """Write the run page and one page per case; returns the files written."""
    from app.eval.report import atomic_write_text

    folder = _case_dir(out)
    names = {c.id: case_file_name(c.id) for c in report.cases}
    _clear(folder)
    written = []
    for case in report.cases:
        html = pages.case_page(report, case.id, back=f"../{out.name}")
        assert html is not None
        path = folder / names[case.id]
        atomic_write_text(path, html)
        written.append(path)
    atomic_write_text(out, pages.run_page(report, {k: f"{folder.name}/{v}" for k, v in names.items()}))  # fmt: skip
    return [out, *written]


def export_compare(base: Report, new: Report, comparison: Comparison, out: Path) -> list[Path]:
    """Write the compare page and one side-by-side page per paired case."""
    from app.eval.report import atomic_write_text

    folder = _case_dir(out)
    base_ids = {c.id for c in base.cases}
    names = {c.id: case_file_name(c.id) for c in new.cases if c.id in base_ids}
    _clear(folder)
    written = []
    for cid, name in names.items():
        html = pages.compare_case_page(
            base, new, cid, back=f"../{out.name}", base_case_href="", new_case_href=""
        )
        assert html is not None
        path = folder / name
        atomic_write_text(path, html)
        written.append(path)
    href = {k: f"{folder.name}/{v}" for k, v in names.items()}
    atomic_write_text(out, pages.compare_page(base, new, comparison, href, "", ""))
    return [out, *written]
