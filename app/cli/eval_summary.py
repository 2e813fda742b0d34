"""The terminal summary of a finished run (``rag eval run``, ``rag eval merge``) and its exit
code: the table, which verdicts gate and which are reported, then the run's one status line
(:mod:`app.eval.report.status`, stored in the report under the gate the run was asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from app.eval.report.records import ReportSummary

__all__ = ["_print_summary", "gate_exit_code"]


def _print_summary(report: ReportSummary, path: Path | None, md: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    from app.eval.report.render import (
        cost_text,
        evaluated_line,
        not_measured,
        outcomes_line,
        repeat_line,
        summary_rows,
    )
    from app.eval.report.status import status_line

    gate = report.meta.config.gate
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    meta = report.meta
    title = (
        f"{meta.suite} · {meta.candidate.provider}"
        f"{' (offline baseline)' if meta.candidate.offline else ''}"
        f" · judge {meta.judge.provider}"
    )
    for ds in meta.datasets:
        console.print(f"dataset {ds.name} v{ds.version} · {ds.cases} cases · {ds.path}")
    table = Table(title=title)
    for col, justify in zip(
        ("metric", "n", "err", "mean", "std", "95% CI", "threshold", "verdict"),
        ("left", "right", "right", "right", "right", "left", "left", "left"),
        strict=True,
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in summary_rows(report, gate):
        table.add_row(*row)
    console.print(table)
    totals = report.totals
    rc = report.refusal_confusion
    console.print(
        f"{evaluated_line(report)} · judge errors "
        f"{totals.judge_errors} · cost {cost_text(totals)} · {totals.duration_s:.1f}s"
        f" · refusals: ok {rc.true_refusal}, missed {rc.missed_refusal}, "
        f"false {rc.false_refusal} · bad cases {len(report.bad_cases)}"
    )
    if report.outcomes:
        console.print(outcomes_line(report))
    if totals.cases_unstable is not None:  # (an offline baseline's note came before the run)
        console.print(repeat_line(report), markup=False)
    engine = totals.engine
    if engine is not None and (engine.retries or engine.throttled):
        budget = engine.retry_budget
        line = (
            f"provider: {engine.calls} requests · {engine.retries} retries"
            f" (budget {budget.get('used', 0)}/{budget.get('allowed', '?')})"
            f" · {engine.throttled} throttled · {engine.errors} failed calls"
        )
        for endpoint, adapted in engine.concurrency.items():
            if adapted.get("decreases"):
                line += (
                    f" · {endpoint}: concurrency {adapted['ceiling']} → min {adapted['min']}"
                    f" → {adapted['final']} ({adapted['decreases']} storm(s))"
                )
        console.print(line)
    if engine is not None and engine.invalid_text_replies:
        console.print(
            f"[yellow]warning:[/yellow] {engine.invalid_text_replies} provider replies held "
            "text that is not valid Unicode (lone surrogates), replaced by U+FFFD; the "
            "report lists the calls under each case's invalid_text"
        )
    for warning in meta.judge.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if unmeasured := not_measured(report):
        console.print(
            f"[red]NOT MEASURED:[/red] {', '.join(unmeasured)} — left out by --metrics; "
            "their gates cannot pass"
        )
    from app.eval.report.notes import unlisted_note

    if note := unlisted_note(report.meta):
        console.print(f"[yellow]warning:[/yellow] {note}")
    if report.partial:
        console.print(f"[yellow]PARTIAL:[/yellow] {report.partial_reason}")
    if gate == "red-lines":
        _print_red_line_gate(console, report)
    console.print(f"status: {status_line(report)}", soft_wrap=True, markup=False)
    if path is not None:
        console.print(f"report: {path}")
    if md is not None:
        console.print(f"summary: {md}")


def _print_red_line_gate(console: Any, report: ReportSummary) -> None:
    """The ``--gate red-lines`` verdict in words: which verdicts gate, which are reported."""
    from app.eval.report.render import red_line_gate

    red_failed, quality_failed = red_line_gate(report)
    names = ", ".join(report.red_line_metrics) or "none"
    console.print(
        f"red lines ({names}): "
        + (f"[red]FAIL[/red] {', '.join(red_failed)}" if red_failed else "hold")
        + (" · run PARTIAL" if report.partial else " · run complete")
        + " — these set the exit code"
    )
    not_met = (
        f"{len(quality_failed)} not met ({', '.join(quality_failed)})"
        if quality_failed
        else "all met"
    )
    role = "baseline-only" if report.meta.candidate.offline else "--gate red-lines"
    console.print(f"quality thresholds: {not_met} — {role}: reported, not gating")


def gate_exit_code(report: ReportSummary, *, echo: bool = True) -> int:
    """The run's exit code: 0 when it passed the gate it was asked for, else 1 (a failed
    gate, a red line, a partial run); ``echo`` prints the status line on stderr."""
    from app.eval.report.status import exit_code, status_line

    if echo:
        click.echo(f"status: {status_line(report)}", err=True)
    return exit_code(report)
