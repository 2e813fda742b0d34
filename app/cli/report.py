"""``rag report``: render a JSON evaluation report as HTML or markdown.

``html`` writes the viewer's run page and one page per case (:mod:`app.view.export`, the
same pages ``rag view`` serves); ``md`` prints the markdown summary
(:mod:`app.eval.render`). Both read the file with :func:`app.eval.report.load_report`,
which refuses a malformed report with exit 2.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def cli() -> None:
    """Render a JSON evaluation report as HTML or markdown."""


@cli.command("html")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Default: REPORT with .html (case pages go in the folder <name>_cases/ beside it).",
)
def html_cmd(report: Path, output: Path | None) -> None:
    """Write REPORT as static viewer pages: the run (summary, filterable case table) and
    one page per case (golden answer, retrieved chunks, judge reasoning, …)."""
    from app.eval.report import load_report
    from app.view.export import export_run

    data = load_report(report)
    out = output or report.with_suffix(".html")
    written = export_run(data, out)
    click.echo(f"{out} (+ {len(written) - 1} case pages in {out.stem}_cases/)")


@cli.command("md")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def md_cmd(report: Path) -> None:
    """Print REPORT's markdown summary."""
    from app.eval.render import render_markdown
    from app.eval.report import load_report

    click.echo(render_markdown(load_report(report)), nl=False)
