"""``rag prompts review --changed-since REV [--delta FILE]… [--json]``.

Prints the seed 004 Appendix B checklist for every prompt module changed since REV (exit 1
when an item is ❌). ``--delta`` takes the comparison(s) produced by ``rag eval diff-prompt``
/ ``rag eval compare`` (markdown or JSON files, or a folder of them); the PR workflow passes
the tables it just computed.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("review")
@click.option("--changed-since", "rev", required=True, help="Git revision, e.g. origin/main.")
@click.option(
    "--delta",
    "deltas",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A delta table (md/json) or a folder of them; repeatable.",
)
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cli(rev: str, deltas: tuple[Path, ...], root: Path | None, as_json: bool) -> None:
    """Compute the prompt review checklist for the prompts changed since REV."""
    from app.generation.registry.review import review_changes

    review = review_changes(rev, root=root, deltas=deltas)
    if as_json:
        click.echo(json.dumps(review.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(review.to_markdown(), nl=False)
    if not review.passed:
        raise click.exceptions.Exit(1)
