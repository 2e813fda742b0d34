"""``rag kb chunks [--search TEXT] [--acl G]``: the chunk ids an expert cites, with heading,
ACL and the first line, so a case's ``golden_chunk_ids`` can be written without guessing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from app.cli import options


@click.group(name="kb")
def cli() -> None:
    """The knowledge base: list its chunks."""


@cli.command("chunks")
@click.option("--search", default="", help="Only chunks whose id, heading or text contain TEXT.")
@click.option(
    "--acl",
    "acl",
    multiple=True,
    help="Only chunks a reader with these groups may read (repeatable; public is implied).",
)
@options.kb
@options.as_json("the chunks")
def chunks(search: str, acl: tuple[str, ...], kb_path: Path | None, as_json: bool) -> None:
    """List chunk ids with heading, ACL and first line (case-insensitive search)."""
    from app.paths import kb_dir
    from app.retrieval.kb import can_read, load_kb

    kb = load_kb(kb_path or kb_dir())
    needle = search.strip().lower()
    rows = []
    for c in kb.chunks:
        if acl and not can_read(acl, c.acl):
            continue
        if needle and needle not in f"{c.chunk_id}\n{c.heading}\n{c.text}".lower():
            continue
        first = next((x for x in c.text.splitlines() if x.strip() and not x.startswith("#")), "")
        rows.append({"id": c.chunk_id, "heading": c.heading, "acl": list(c.acl), "first": first})
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for r in rows:
        click.echo(f"{r['id']}  [{', '.join(r['acl'])}]  {r['heading']}")
        click.echo(f"    {r['first'][:120]}")
    click.echo(f"{len(rows)} chunk(s) of {len(kb.chunks)}")
