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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from app.retrieval.bm25 import BM25
from app.retrieval.kb import Chunk, KnowledgeBase, can_read, held_groups
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


_new = object.__new__


def new_hit(chunk: Chunk, score: float, raw_score: float, query: str) -> Hit:
    """``Hit(chunk, score, raw_score, query)``, the same instance without the frozen
    dataclass's four ``object.__setattr__`` calls (its fields live in the instance dict)."""
    hit: Hit = _new(Hit)
    hit.__dict__.update(chunk=chunk, score=score, raw_score=raw_score, query=query)
    return hit


@dataclass(frozen=True)
class _View:
    chunks: tuple[Chunk, ...]
    bm25: BM25
    positions: dict[str, int] = field(default_factory=dict)  # chunk id -> its first position
    #: each position's rank in chunk-id order (equal ids, equal ranks): search()'s tie-break
    id_rank: tuple[int, ...] = ()


class _Lexical:
    """One query over one view: its terms and ``BM25.sparse`` (the denominator and, for each
    chunk holding a query term, the numerator and the raw score). Read-only by convention
    (a plain slotted class: built once per query, a frozen dataclass's setattr calls cost
    more than the rest of the lookup)."""

    __slots__ = ("denom", "nums", "raws", "terms")

    def __init__(
        self, terms: list[str], denom: float, nums: dict[int, float], raws: dict[int, float]
    ) -> None:
        self.terms, self.denom, self.nums, self.raws = terms, denom, nums, raws

    def normalized(self, i: int) -> float:
        """``BM25.normalized_score`` of position ``i`` (the same float)."""
        num = self.nums.get(i)
        return 0.0 if num is None or self.denom <= 0.0 else min(1.0, num / self.denom)


_NO_TERMS = _Lexical([], 0.0, {}, {})

#: (query, readable groups) -> the query's terms and scores (:class:`_Lexical`; the reranker
#: asks score() once per candidate and query variant)
LEXICAL_CACHE = 256


def _groups(user_acl: Iterable[str]) -> frozenset[str]:
    return held_groups(user_acl)  # the one rule (app.retrieval.kb)


class Retriever:
    """BM25 over a knowledge base, one ACL view per reader-group set."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self._views: dict[frozenset[str], _View] = {}
        self._lock = threading.Lock()
        self._terms: dict[tuple[str, frozenset[str]], _Lexical] = {}

    def _view(self, user_acl: Iterable[str], groups: frozenset[str] | None = None) -> _View:
        if groups is None:
            groups = _groups(user_acl)
        view = self._views.get(groups)  # (a dict read is atomic; built under the lock)
        if view is not None:
            return view
        with self._lock:
            view = self._views.get(groups)
            if view is None:
                readable = tuple(c for c in self.kb.chunks if can_read(groups, c.acl))
                positions: dict[str, int] = {}
                for i, c in enumerate(readable):
                    positions.setdefault(c.chunk_id, i)
                ids = sorted({c.chunk_id for c in readable})
                rank = {cid: r for r, cid in enumerate(ids)}
                view = _View(
                    readable,
                    BM25([tokenize(self._index_text(c), query=False) for c in readable]),
                    positions,
                    tuple(rank[c.chunk_id] for c in readable),
                )
                self._views[groups] = view
            return view

    def _lexical(self, query: str, user_acl: Iterable[str]) -> tuple[_View, _Lexical]:
        """The view and the query's :class:`_Lexical` over it (``tokenize(query)`` and
        ``BM25.sparse`` of its terms), memoised per (query, view), at most
        :data:`LEXICAL_CACHE` entries."""
        groups = _groups(user_acl)
        view = self._view(user_acl, groups)
        key = (query, groups)
        found = self._terms.get(key)  # (a dict read is atomic; written under the lock)
        if found is None:
            terms = tokenize(query)
            found = _Lexical(terms, *view.bm25.sparse(terms)) if terms else _NO_TERMS
            with self._lock:
                if len(self._terms) >= LEXICAL_CACHE:
                    self._terms.clear()
                self._terms[key] = found
        return view, found

    @staticmethod
    def _index_text(chunk: Chunk) -> str:
        # the title is indexed with the chunk so "差旅费报销制度" finds every part of it
        return f"{chunk.title}\n{chunk.text}"

    def readable(self, user_acl: Iterable[str]) -> tuple[Chunk, ...]:
        """The chunks this reader may see (what the index scores for them)."""
        return self._view(user_acl).chunks

    def search(self, query: str, user_acl: Iterable[str], k: int = 5) -> list[Hit]:
        """Top-``k`` readable chunks for ``query``, best first (empty when nothing matches)."""
        view, lex = self._lexical(query, user_acl)
        if not lex.terms or not view.chunks:
            return []
        denom, nums, rank = lex.denom, lex.nums, view.id_rank
        # the order of a stable sort by (-normalised, -raw, chunk id) over the documents in
        # index order: the tuples are distinct (position last), so sorting them is that sort
        if denom > 0.0:
            keyed = [(-min(1.0, nums[i] / denom), -raw, rank[i], i) for i, raw in lex.raws.items()]
        else:
            keyed = [(-0.0, -raw, rank[i], i) for i, raw in lex.raws.items()]
        keyed.sort()
        best = keyed[:k]
        chunks = view.chunks
        return [
            new_hit(chunks[i], round(-neg_norm, 6), round(-neg_raw, 6), query)
            for neg_norm, neg_raw, _, i in best
        ]

    def score(self, query: str, chunk: Chunk, user_acl: Iterable[str]) -> float:
        """The normalised score of one readable chunk for ``query`` (0.0 if not readable)."""
        view, lex = self._lexical(query, user_acl)
        i = view.positions.get(chunk.chunk_id)
        return round(lex.normalized(i), 6) if lex.terms and i is not None else 0.0

    def scorer(self, query: str, user_acl: Iterable[str]) -> Callable[[Chunk], float]:
        """``chunk -> self.score(query, chunk, user_acl)``, the query's part done once (the
        reranker scores each candidate against each query variant)."""
        if type(self).score is not Retriever.score:  # a subclass scores its own way
            return _per_call(self, query, user_acl)
        view, lex = self._lexical(query, user_acl)
        if not lex.terms:
            return lambda chunk: 0.0
        position, normalized = view.positions.get, lex.normalized

        def score(chunk: Chunk) -> float:
            i = position(chunk.chunk_id)
            return 0.0 if i is None else round(normalized(i), 6)

        return score


def _per_call(
    retriever: Retriever, query: str, user_acl: Iterable[str]
) -> Callable[[Chunk], float]:
    groups = list(user_acl)
    return lambda chunk: retriever.score(query, chunk, groups)
