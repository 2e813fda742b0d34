"""Retrieval metrics with trec_eval's definitions — a small public API.

``ranked`` is a list of ids in rank order (rank 1 first); ``relevant`` maps id → grade
(grade > 0 is relevant, missing ids are grade 0, as unjudged documents are in trec_eval).

==============  ================  ==========================================================
ours            trec_eval         definition
==============  ================  ==========================================================
hit_rate@k      ``success_k``     1 if any relevant id is in the top k, else 0
recall@k        ``recall_k``      relevant ids in the top k / all relevant ids
mrr (k=None)    ``recip_rank``    1 / rank of the first relevant id (0 if none); an optional
                                  ``k`` ignores ranks beyond k
ndcg@k          ``ndcg_cut_k``    DCG@k / IDCG@k, gain = grade (linear), discount log2(rank+1);
                                  the ideal ranking sorts *all* judged relevant ids by grade,
                                  cut at k
==============  ================  ==========================================================

Ties: trec_eval orders a run by score (then by docno). Here the caller's list *is* the
order, so tied scores are ranked as the run lists them — identical to feeding trec_eval
strictly decreasing scores in list order. ``k`` larger than the run means "the whole run"
(trec_eval's "cutoffs not achieved"). A duplicate id is an error, as in trec_eval.

With no relevant id at all the measures are undefined here (``None``) rather than 0:
trec_eval averages only over topics that have relevance judgements, and our reports keep
undefined values as ``null`` with a reason instead of pulling the mean down.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = ["dcg", "hit_rate", "mrr", "ndcg", "recall"]


def _check(ranked: Sequence[str], k: int | None) -> None:
    if k is not None and k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    if len(set(ranked)) != len(ranked):
        dups = sorted(doc for doc, n in Counter(ranked).items() if n > 1)
        raise ValueError(f"duplicate ids in the ranked list: {dups} — deduplicate the run first")


def _relevant_ids(relevant: Mapping[str, float]) -> set[str]:
    return {doc for doc, grade in relevant.items() if grade > 0}


def hit_rate(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> float | None:
    """trec_eval ``success_k``: 1.0 if a relevant id is within the top ``k``, else 0.0."""
    _check(ranked, k)
    rel = _relevant_ids(relevant)
    if not rel:
        return None
    return 1.0 if any(doc in rel for doc in ranked[:k]) else 0.0


def recall(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> float | None:
    """trec_eval ``recall_k``: relevant retrieved in the top ``k`` / all relevant."""
    _check(ranked, k)
    rel = _relevant_ids(relevant)
    if not rel:
        return None
    return sum(1 for doc in ranked[:k] if doc in rel) / len(rel)


def mrr(ranked: Sequence[str], relevant: Mapping[str, float], k: int | None = None) -> float | None:
    """trec_eval ``recip_rank``: 1 / rank of the first relevant id, 0.0 when none is found.

    The mean over cases is the MRR; ``k`` (optional) stops looking after rank ``k``.
    """
    _check(ranked, k)
    rel = _relevant_ids(relevant)
    if not rel:
        return None
    window = ranked if k is None else ranked[:k]
    for rank, doc in enumerate(window, start=1):
        if doc in rel:
            return 1.0 / rank
    return 0.0


def dcg(gains: Sequence[float]) -> float:
    """Σ gain_i / log2(i + 1) over ranks i = 1, 2, … (trec_eval's ndcg discount)."""
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1) if g > 0)


def ndcg(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> float | None:
    """trec_eval ``ndcg_cut_k`` with linear gain (the grade) and log2(rank+1) discount."""
    _check(ranked, k)
    if not _relevant_ids(relevant):
        return None
    run_gains = [max(float(relevant.get(doc, 0.0)), 0.0) for doc in ranked[:k]]
    ideal_gains = sorted((float(g) for g in relevant.values() if g > 0), reverse=True)[:k]
    ideal = dcg(ideal_gains)
    return dcg(run_gains) / ideal
