"""The reranker seam: dual recall merges candidate lists, a reranker orders them.

A :class:`Reranker` takes the query variants (rewritten first, then the original) and the
merged, de-duplicated candidates, and returns them re-scored and sorted, best first. Its
scores must stay in [0, 1] because the assembly floors read them. A cross-encoder service
(e.g. BGE-reranker behind HTTP) implements the same protocol and is registered by name.

The default :class:`LexicalReranker` re-scores every candidate against **every** query
variant with the index's normalised BM25 and keeps the best — so a chunk found only by the
original query competes on equal terms with one found by the rewrite ("两条路都召回，
重排时再决胜负", seed 003 §4.1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from app.errors import ConfigError
from app.retrieval.index import Hit, Retriever, new_hit


class Reranker(Protocol):
    name: str

    def rerank(
        self, queries: Sequence[str], hits: Sequence[Hit], user_acl: Iterable[str]
    ) -> list[Hit]: ...


def merge_hits(*lists: Sequence[Hit]) -> list[Hit]:
    """Merge recall lists, de-duplicated by chunk id, keeping each chunk's best hit."""
    best: dict[str, Hit] = {}
    for hits in lists:
        for hit in hits:
            seen = best.get(hit.chunk_id)
            if seen is None or hit.score > seen.score:
                best[hit.chunk_id] = hit
    return sort_hits(best.values())


def sort_hits(hits: Iterable[Hit]) -> list[Hit]:
    return sorted(hits, key=lambda h: (-h.score, -h.raw_score, h.chunk_id))


class LexicalReranker:
    """Best normalised BM25 over the query variants (the offline default)."""

    name = "lexical"

    def __init__(self, retriever: Retriever) -> None:
        self._retriever = retriever

    def rerank(
        self, queries: Sequence[str], hits: Sequence[Hit], user_acl: Iterable[str]
    ) -> list[Hit]:
        if not hits:
            return []
        groups = list(user_acl)
        # each variant's scores once (the same floats as score(q, chunk, groups) per call)
        scorers = [(q, self._retriever.scorer(q, groups)) for q in queries]
        out = []
        for hit in hits:
            best, best_q, higher = hit.score, hit.query, False
            for q, score in scorers:
                s = score(hit.chunk)
                if s > best:
                    best, best_q, higher = s, q, True
            if not higher:  # no variant scored higher: the hit as it is
                out.append(hit)
            elif type(hit) is Hit:  # (dataclasses.replace, without its per-call field walk)
                out.append(new_hit(hit.chunk, best, hit.raw_score, best_q))
            else:
                out.append(replace(hit, score=best, query=best_q))
        return sort_hits(out)


_RERANKERS: dict[str, Callable[[Retriever], Reranker]] = {"lexical": LexicalReranker}


def register_reranker(name: str, factory: Callable[[Retriever], Reranker]) -> None:
    """Make a reranker selectable by name in ``PipelineConfig.reranker``."""
    _RERANKERS[name] = factory


def get_reranker(name: str, retriever: Retriever) -> Reranker:
    if name not in _RERANKERS:
        raise ConfigError(
            f"unknown reranker {name!r} — use one of {', '.join(sorted(_RERANKERS))} "
            "or register one with app.retrieval.rerank.register_reranker"
        )
    return _RERANKERS[name](retriever)
