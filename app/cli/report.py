"""``rag report``: render a JSON evaluation report as HTML or markdown.

The renderers (and the HTML template) live in :mod:`app.eval.render`, next to the
markdown summary; this module only reads the file (:func:`app.eval.report.load_report`,
which refuses a malformed report with exit 2) and writes the page.
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
    help="Default: REPORT with .html.",
)
def html_cmd(report: Path, output: Path | None) -> None:
    """Write REPORT as a self-contained HTML page."""
    from app.eval.render import render_html
    from app.eval.report import atomic_write_text, load_report

    data = load_report(report)
    out = output or report.with_suffix(".html")
    atomic_write_text(out, render_html(data))
    click.echo(str(out))


@cli.command("md")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def md_cmd(report: Path) -> None:
    """Print REPORT's markdown summary."""
    from app.eval.render import render_markdown
    from app.eval.report import load_report

    click.echo(render_markdown(load_report(report)), nl=False)
