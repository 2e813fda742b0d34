"""``rag kb chunks [--search TEXT] [--acl G]``: the chunk ids an expert cites, with heading,
ACL and the first line, so a case's ``golden_chunk_ids`` can be written without guessing.

``rag kb embed [--threads N]``: embed the chunks the vector cache does not hold yet, now, in
batches on N threads with progress — what the first dense run would otherwise do before its
first request."""

from __future__ import annotations

import json
from pathlib import Path

import click

from app.cli import options


@click.group(name="kb")
def cli() -> None:
    """The knowledge base: list its chunks, embed them."""


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
    from app.text import mentions  # NFKC + case-folded, as every marker search

    needle = search.strip()
    rows = []
    for c in kb.chunks:
        if acl and not can_read(acl, c.acl):
            continue
        if needle and not mentions(f"{c.chunk_id}\n{c.heading}\n{c.text}", [needle]):
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


@cli.command("embed")
@options.kb
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="Engine threads for the batches (default: $RAG_EMBED_THREADS, else every core).",
)
@options.embedder
def embed(kb_path: Path | None, threads: int | None, embedder: str) -> None:
    """Embed the chunks (text and title) the vector cache does not hold yet, with progress.

    Only chunks whose text changed since they were embedded cost anything; the vectors go
    into .cache/embeddings/ (or $RAG_EMBED_CACHE_DIR), where every later run reads them.
    """
    import os

    from app.paths import kb_dir
    from app.retrieval.hybrid import HybridRetriever
    from app.retrieval.kb import load_kb

    if threads is not None:
        os.environ["RAG_EMBED_THREADS"] = str(threads)
    from app.retrieval.embed import get_embedder

    kb = load_kb(kb_path or kb_dir())
    cached = get_embedder(embedder)
    before, reused, shipped = cached.misses, cached.reused, cached.from_shipped
    HybridRetriever(kb, cached)
    new, old = cached.misses - before, cached.reused - reused
    ready = cached.from_shipped - shipped
    click.echo(
        f"{len(kb.chunks)} chunk(s) of {kb.root}: {new} text(s) embedded now, {ready} found in "
        f"the vectors shipped with the checkout, {old} read from the previous key's file, the "
        f"rest already in {cached.path}"
    )
