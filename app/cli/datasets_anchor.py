"""``rag datasets anchor`` and ``rag datasets repoint``: golden labels that follow their text.

* ``rag datasets anchor [FILE…] [--replace]`` writes, into each dataset file (default: the
  newest file of every suite), an anchor for every labelled chunk that has none — the passage
  the id points at in today's knowledge base (:mod:`app.eval.datasets.anchors`). Adding an
  anchor changes no label: the check resolves it to the very id it was written for.
* ``rag datasets repoint CASE OLD_ID NEW_ID…`` re-points a label whose passage changed or
  vanished (``rag datasets check`` prints this command with the nearest chunk) and writes
  the next version of the case's suite, with a fresh anchor and a CHANGELOG.md entry.

Registered on the ``rag datasets`` group. Exit 0 done, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from app.errors import DatasetError


@click.command("anchor")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--replace",
    is_flag=True,
    help="Re-anchor every label at the chunk it names now (after checking the ids by hand).",
)
def anchor_cmd(files: tuple[Path, ...], replace: bool) -> None:
    """Anchor every golden/acceptable chunk label to its passage (the newest file of each
    suite by default)."""
    from app.eval.datasets.anchors import anchor_suite
    from app.eval.datasets.case import available_suites
    from app.paths import datasets_dir, kb_dir
    from app.retrieval.kb import load_kb

    kb = load_kb(kb_dir())
    paths = list(files) or [v[-1][1] for v in available_suites(datasets_dir()).values()]
    for path in sorted(paths):
        if not path.is_file():
            raise DatasetError(f"{path}: file not found — give a dataset .jsonl file")
        changed = anchor_suite(path, kb, replace=replace)
        click.echo(f"{path.name}: {len(changed)} case(s) anchored")


@click.command("repoint")
@click.argument("case_id")
@click.argument("old_id")
@click.argument("new_ids", nargs=-1, required=True)
def repoint_cmd(case_id: str, old_id: str, new_ids: tuple[str, ...]) -> None:
    """Point CASE_ID's label OLD_ID at NEW_ID(s) (chunks of today's knowledge base), in the
    next version of its suite."""
    from app.eval.datasets.anchors import repoint_case
    from app.paths import datasets_dir, kb_dir
    from app.retrieval.kb import load_kb

    target, suite = repoint_case(datasets_dir(), case_id, old_id, list(new_ids), load_kb(kb_dir()))
    click.echo(
        f"wrote {target.name}: {case_id} now labels {', '.join(new_ids)} instead of {old_id} "
        f"(suite {suite}; CHANGELOG.md entry added — say why there)"
    )
