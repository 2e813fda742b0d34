"""``rag judge``: judge governance (seed 004 §10).

``rag judge calibrate --labels FILE --judge J [--samples N] [--json]`` scores human-labelled
rows with the judge and prints exact and ±1 agreement, quadratic-weighted Cohen's κ and
Spearman ρ. The verdict uses exact agreement: > 85 % pass, 75–85 % warn (exit 0),
< 75 % fail (exit 1). Bad labels or an unknown judge exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from app.cli import options


@click.group("judge")
def cli() -> None:
    """Judge governance: calibrate a judge against human labels."""


@cli.command("calibrate")
@click.option(
    "--labels",
    "labels",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="JSONL of human-labelled rows (e.g. tests/eval/calibration/labels_v1.0.jsonl).",
)
@click.option(
    "--judge",
    required=True,
    type=options.PROVIDER,
    help="Judge model, e.g. anthropic:claude-opus-4-7.",
)
@click.option("--samples", type=int, default=3, show_default=True, help="Judge samples per row.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate_cmd(labels: Path, judge: str, samples: int, as_json: bool) -> None:
    """Measure a judge's agreement with human labels (exit 1 below 75 % exact agreement)."""
    from app.eval.scoring.calibrate import calibrate

    result = calibrate(labels, judge, samples=samples)
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(result.to_text(), nl=False)
    if result.verdict == "fail":
        raise click.exceptions.Exit(1)
