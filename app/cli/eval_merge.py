"""``rag eval merge REPORT… [--out DIR]``: shard reports into one report (see app.eval.report.merge).

Writes the merged report like a run does (JSON + markdown) and prints its summary; exit 0/1
by the merged report's status under the gate the shards were run with (``--gate`` to choose
another), 2 when the shards do not form one run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from app.cli import options

if TYPE_CHECKING:
    from app.eval.config import Gate
    from app.eval.report.records import Report


@click.command("merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@options.report_out
@options.gate
@click.option(
    "--allow-truth-change",
    is_flag=True,
    help="Merge even if the shards' knowledge base, prompt content or resolved retriever "
    "differ (the merged report lists the differences; compare prints them).",
)
def merge_cmd(
    reports: tuple[Path, ...], out_dir: Path | None, gate: str | None, allow_truth_change: bool
) -> None:
    """Merge the shard REPORTS of one run (`rag eval run --shard i/N`) into one report."""
    from app.cli.eval_summary import _print_summary, gate_exit_code
    from app.eval.report.io import report_chunks, report_filename, write_report_rows
    from app.eval.report.merge import merge_files
    from app.eval.report.records import Report, ReportSummary
    from app.paths import reports_dir

    chosen = cast("Gate | None", gate)
    # streamed: one shard case in memory at a time (a whole-report merge for shards that
    # are not in the run's line layout)
    merged = merge_files(list(reports), allow_truth_change=allow_truth_change, gate=chosen)
    summary: ReportSummary
    rows: Callable[[], Iterable[str]]
    if isinstance(merged, Report):
        whole = merged
        summary, rows = whole, lambda: _rows_of(whole)
    else:
        summary, rows = merged
    target = out_dir or reports_dir()
    existing = target / report_filename(summary.created_at, summary.run_id)
    if existing.exists() and _same_bytes(existing, report_chunks(summary, rows)()):
        click.echo(f"already merged: {existing} (identical; nothing written)")
        path, md = existing, existing.with_suffix(".md")
    else:
        target.mkdir(parents=True, exist_ok=True)
        path, md = write_report_rows(summary, rows, target)
    click.echo(f"merged {len(summary.meta.merged_from)} shards, {summary.totals.cases_done} cases")
    _print_summary(summary, path, md)
    raise SystemExit(gate_exit_code(summary, echo=False))


def _rows_of(report: Report) -> Iterator[str]:
    from app.eval.report.io import checked_rows

    return checked_rows(report)


def _same_bytes(path: Path, chunks: Iterable[bytes]) -> bool:
    """Whether the file holds exactly the bytes of ``chunks`` (both read as they come)."""
    mine, theirs = hashlib.sha256(), hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            theirs.update(block)
    for chunk in chunks:
        mine.update(chunk)
    return mine.digest() == theirs.digest()
