"""Okapi BM25 with a documented normalisation of scores into [0, 1].

Raw BM25 (Robertson/Sparck Jones, the Lucene ``idf`` that never goes negative)::

    idf(t)    = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    w(t, d)   = tf(t, d)·(k1 + 1) / (tf(t, d) + k1·(1 − b + b·|d| / avgdl))
    bm25(q,d) = Σ_{t ∈ q} qtf(t) · idf(t) · w(t, d)

Raw scores have no fixed scale (they grow with query length and IDF), so the assembly
floors 0.45 / 0.88 / 0.75·top-1 would mean nothing on them. **Normalisation** (what the
index returns as ``score``)::

    score(q, d) = Σ_t qtf(t) · idf(t) · min(1, w(t, d))  /  Σ_t qtf(t) · idf(t)

i.e. the query's BM25 against ``d`` divided by its *reference self-match*: the score the query
gets against an average-length document that contains each query term exactly once
(``w = 1`` there). Each term's contribution is capped at that reference so one repeated
term cannot make up for a missing one. The result is the IDF-weighted share of the query
that ``d`` covers, with BM25's length normalisation and tf saturation:

* 1.0 — every query term present at least as strongly as once in an average-length chunk
  (→ the strict mode, ≥ 0.88, means "the chunk answers the whole query");
* 0.45 — less than half of the query's information (IDF mass) found (→ refusal below it);
* terms that occur in no readable chunk keep their (high) IDF in the denominator, so a
  question about something the KB does not contain scores low instead of being rescaled
  to look confident — the reason a max-score or softmax normalisation was rejected.

The scale is deterministic, per query and per document (no dependence on the other hits),
so a floor means the same thing whatever else was retrieved.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

K1 = 1.5
B = 0.75


@dataclass
class BM25:
    """An in-memory BM25 index over pre-tokenised documents."""

    docs: Sequence[Sequence[str]]
    k1: float = K1
    b: float = B
    _tfs: list[Counter[str]] = field(init=False, repr=False)
    _df: Counter[str] = field(init=False, repr=False)
    _lengths: list[int] = field(init=False, repr=False)
    avgdl: float = field(init=False)

    def __post_init__(self) -> None:
        self._tfs = [Counter(d) for d in self.docs]
        self._lengths = [len(d) for d in self.docs]
        self._df = Counter()
        for tf in self._tfs:
            self._df.update(tf.keys())
        n = len(self.docs)
        self.avgdl = (sum(self._lengths) / n) if n else 0.0

    @property
    def n_docs(self) -> int:
        return len(self._tfs)

    def idf(self, term: str) -> float:
        n, df = self.n_docs, self._df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def _weight(self, tf: int, length: int) -> float:
        if tf == 0:
            return 0.0
        norm = 1.0 - self.b + self.b * (length / self.avgdl if self.avgdl else 1.0)
        return tf * (self.k1 + 1.0) / (tf + self.k1 * norm)

    def raw_score(self, query: Sequence[str], index: int) -> float:
        """Plain BM25 of ``query`` against document ``index``."""
        tf, length = self._tfs[index], self._lengths[index]
        return sum(
            q * self.idf(t) * self._weight(tf.get(t, 0), length) for t, q in Counter(query).items()
        )

    def normalized_score(self, query: Sequence[str], index: int) -> float:
        """The [0, 1] score defined in the module docstring (0.0 for an empty query)."""
        qtf = Counter(query)
        denom = sum(q * self.idf(t) for t, q in qtf.items())
        if denom <= 0.0:
            return 0.0
        tf, length = self._tfs[index], self._lengths[index]
        num = sum(
            q * self.idf(t) * min(1.0, self._weight(tf.get(t, 0), length)) for t, q in qtf.items()
        )
        return num / denom

    def scores(self, query: Sequence[str]) -> list[tuple[int, float, float]]:
        """``(index, normalised, raw)`` for every document that shares a term with the query."""
        terms = set(query)
        out = []
        for i, tf in enumerate(self._tfs):
            if terms.isdisjoint(tf):
                continue
            out.append((i, self.normalized_score(query, i), self.raw_score(query, i)))
        return out
