"""``rag report``: render a JSON evaluation report as HTML or markdown.

``html`` writes the viewer's run page and the data its case table and case page are drawn
from in the browser (:mod:`app.view.export`; the same renderer ``rag view`` uses), reading
the report case by case (:func:`app.view.stream.read_cases`: a report in the layout ``rag eval
run`` writes is streamed, so a 100,000-case report is written in bounded memory); ``md`` prints the markdown
summary (:mod:`app.eval.report.render`) of :func:`app.eval.report.io.load_report`. A malformed
report is refused with exit 2 (file, line, field).
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
    help="Default: REPORT with .html (the case data and page go in the folder <name>_cases/ beside it).",
)
def html_cmd(report: Path, output: Path | None) -> None:
    """Write REPORT as static viewer pages: the run (summary, filterable case table) and
    a case page (golden answer, retrieved chunks, judge reasoning, prompt as sent, …)
    drawing any case from the data files beside it."""
    from app.view.export import export_run
    from app.view.stream import read_cases

    data = read_cases(report)  # a line-layout report: streamed while it is written
    out = output or report.with_suffix(".html")
    written = export_run(data, out)
    click.echo(
        f"{out} (+ {data.read} cases in {out.stem}_cases/: case.html and "
        f"{len(written) - 2} data files)"
    )


@cli.command("md")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def md_cmd(report: Path) -> None:
    """Print REPORT's markdown summary."""
    from app.eval.report.io import load_report
    from app.eval.report.render import render_markdown

    click.echo(render_markdown(load_report(report)), nl=False)
