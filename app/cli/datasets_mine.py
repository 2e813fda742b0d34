"""``rag datasets mine ANSWER_LOG``: hard-case candidates from an answer log (seed 004 §8.3).

Registered on the ``rag datasets`` group; the rules and their thresholds are in
:mod:`app.eval.datasets.mining`. Candidates are written for review under ``reports/candidates/``, never
into a suite. Exit 0 when the log was read (with or without candidates), 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("mine")
@click.argument("answer_log", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for the candidate file (default: reports/candidates/).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--dry-run", is_flag=True, help="Print the candidates; write nothing.")
def mine_cmd(answer_log: Path, out_dir: Path | None, as_json: bool, dry_run: bool) -> None:
    """Propose hard cases from ANSWER_LOG by the seed's four rules: no recall (0 results or
    top-1 < 0.3), ≥ 3 users 👎 on one kind of question within a week, citations out of range,
    answers slower than 10 s."""
    from app.eval.datasets.mining import RULES, check_out_dir, mine, write_candidates
    from app.ops.logs import read_answer_log
    from app.paths import datasets_dir, reports_dir

    target = check_out_dir(out_dir or reports_dir() / "candidates", datasets_dir())
    log = read_answer_log(answer_log)
    result = mine(log, datasets_dir=datasets_dir())
    written = None
    if result.candidates and not dry_run:
        written = write_candidates(result, answer_log, target)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "answers": result.answers,
                    "feedback": result.feedback,
                    "orphan_feedback": result.orphan_feedback,
                    "p99_latency_ms": result.p99_latency_ms,
                    "counts": result.counts,
                    "candidates": [c.to_json(answer_log, "") for c in result.candidates],
                    "known": [
                        {"question": c.question, "known_as": c.known_as} for c in result.known
                    ],
                    "written": str(written) if written else None,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    p99 = "—" if result.p99_latency_ms is None else f"{result.p99_latency_ms:.0f} ms"
    click.echo(
        f"{answer_log}: {result.answers} answers, {result.feedback} feedback records"
        f" ({result.orphan_feedback} on traces not in this log); P99 latency {p99}"
    )
    for rule in RULES:
        click.echo(f"  {rule:<22} {result.counts[rule]} candidate(s)")
    if result.known:
        click.echo(f"  already in a suite      {len(result.known)} (not proposed again)")
    for cand in result.candidates:
        click.echo(f"  - {cand.id}  [{', '.join(cand.rules)}]  {cand.question[:60]}")
    if written:
        click.echo(f"wrote {len(result.candidates)} candidate(s) for review: {written}")
    elif not result.candidates:
        click.echo("no candidates")
