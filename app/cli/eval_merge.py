"""``rag eval merge REPORT… [--out DIR]``: shard reports into one report (see app.eval.report.merge).

Writes the merged report like a run does (JSON + markdown) and prints its summary; exit 0/1
by the merged report's status under the gate the shards were run with (``--gate`` to choose
another), 2 when the shards do not form one run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from app.cli import options

if TYPE_CHECKING:
    from app.eval.config import Gate


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
    from app.eval.report.io import load_report, report_filename, report_json, write_report
    from app.eval.report.merge import merge_reports
    from app.paths import reports_dir

    loaded = [load_report(p) for p in reports]
    chosen = cast("Gate | None", gate)
    merged = merge_reports(loaded, allow_truth_change=allow_truth_change, gate=chosen)
    target = out_dir or reports_dir()
    existing = target / report_filename(merged.created_at, merged.run_id)
    if existing.exists() and existing.read_text(encoding="utf-8") == report_json(merged):
        click.echo(f"already merged: {existing} (identical; nothing written)")
        path, md = existing, existing.with_suffix(".md")
    else:
        target.mkdir(parents=True, exist_ok=True)
        path, md = write_report(merged, target)
    click.echo(f"merged {len(merged.meta.merged_from)} shards, {len(merged.cases)} cases")
    _print_summary(merged, path, md)
    raise SystemExit(gate_exit_code(merged, echo=False))
