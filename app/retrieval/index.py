"""ACL-filtered lexical retrieval over a :class:`~app.retrieval.kb.KnowledgeBase`.

The access rule is applied **before** anything is scored: for a reader's groups the index
first selects the chunks :func:`~app.retrieval.kb.can_read` allows, and builds the BM25
statistics (document frequencies, average length) over *those chunks only*. A chunk the
reader may not see therefore never reaches scoring, ranking, assembly, traces or logs,
and does not even influence the scores of the chunks they may see. One BM25 view is
cached per distinct set of effective groups.

Each hit carries the [0, 1] score of :mod:`app.retrieval.bm25` (and the raw BM25 score
for debugging). Ties are broken by chunk id so results are deterministic.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.retrieval.bm25 import BM25
from app.retrieval.kb import Chunk, KnowledgeBase, can_read
from app.text.analyser import tokenize


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with its normalised score in [0, 1]."""

    chunk: Chunk
    score: float
    raw_score: float = 0.0
    query: str = ""  # the query text (rewritten or original) that found it

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id


@dataclass(frozen=True)
class _View:
    chunks: tuple[Chunk, ...]
    bm25: BM25
    positions: dict[str, int] = field(default_factory=dict)  # chunk id -> its first position


#: (query, readable groups) -> the query's terms and every readable chunk's normalised score
#: (the reranker asks score() once per candidate and query variant)
LEXICAL_CACHE = 256


class Retriever:
    """BM25 over a knowledge base, one ACL view per reader-group set."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self._views: dict[frozenset[str], _View] = {}
        self._lock = threading.Lock()
        self._terms: dict[tuple[str, frozenset[str]], tuple[list[str], list[float]]] = {}

    def _view(self, user_acl: Iterable[str]) -> _View:
        groups = frozenset(user_acl) | {"public"}
        with self._lock:
            view = self._views.get(groups)
            if view is None:
                readable = tuple(c for c in self.kb.chunks if can_read(groups, c.acl))
                positions: dict[str, int] = {}
                for i, c in enumerate(readable):
                    positions.setdefault(c.chunk_id, i)
                view = _View(
                    readable,
                    BM25([tokenize(self._index_text(c), query=False) for c in readable]),
                    positions,
                )
                self._views[groups] = view
            return view

    def _lexical(self, query: str, user_acl: Iterable[str]) -> tuple[_View, list[str], list[float]]:
        """The view, ``tokenize(query)`` and every readable chunk's normalised score
        (``BM25.normalized_scores``: the same floats as ``normalized_score`` one by one),
        memoised per (query, view), at most :data:`LEXICAL_CACHE` entries."""
        view = self._view(user_acl)
        key = (query, frozenset(user_acl) | {"public"})
        with self._lock:
            found = self._terms.get(key)
        if found is None:
            terms = tokenize(query)
            found = (terms, view.bm25.normalized_scores(terms) if terms else [])
            with self._lock:
                if len(self._terms) >= LEXICAL_CACHE:
                    self._terms.clear()
                self._terms[key] = found
        return view, found[0], found[1]

    @staticmethod
    def _index_text(chunk: Chunk) -> str:
        # the title is indexed with the chunk so "差旅费报销制度" finds every part of it
        return f"{chunk.title}\n{chunk.text}"

    def readable(self, user_acl: Iterable[str]) -> tuple[Chunk, ...]:
        """The chunks this reader may see (what the index scores for them)."""
        return self._view(user_acl).chunks

    def search(self, query: str, user_acl: Iterable[str], k: int = 5) -> list[Hit]:
        """Top-``k`` readable chunks for ``query``, best first (empty when nothing matches)."""
        view, terms, _ = self._lexical(query, user_acl)
        if not terms or not view.chunks:
            return []
        scored = view.bm25.scores(terms)
        scored.sort(key=lambda item: (-item[1], -item[2], view.chunks[item[0]].chunk_id))
        return [
            Hit(chunk=view.chunks[i], score=round(norm, 6), raw_score=round(raw, 6), query=query)
            for i, norm, raw in scored[:k]
        ]

    def score(self, query: str, chunk: Chunk, user_acl: Iterable[str]) -> float:
        """The normalised score of one readable chunk for ``query`` (0.0 if not readable)."""
        view, terms, normalized = self._lexical(query, user_acl)
        i = view.positions.get(chunk.chunk_id)
        return round(normalized[i], 6) if terms and i is not None else 0.0
