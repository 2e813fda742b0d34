"""Retrieval metrics against trec_eval's definitions, on hand-worked cases.

trec_eval (usnistgov/trec_eval, m_success.c, m_recall.c, m_recip_rank.c,
m_ndcg_cut.c): success_k = 1 if a relevant doc is in the top k; recall_k = relevant in
top k / all relevant in the qrels; recip_rank = 1 / rank of the first relevant doc;
ndcg_cut_k = Σ_{i<k} gain_i / log2(i + 2) (0-based i, i.e. log2(rank + 1)) divided by the
same sum over all judged relevant docs sorted by grade, cut at k. Gains are the grades.

Logs used below: log2(2) = 1, log2(3) = 1.5849625, log2(4) = 2, log2(5) = 2.3219281.
"""

from __future__ import annotations

import math

import pytest

from app.eval.scoring import retrieval

L3 = math.log2(3)  # 1.5849625…
L5 = math.log2(5)  # 2.3219281…

# (label, ranked, qrels, k, success_k, recall_k, recip_rank, ndcg_cut_k)
TABLE = [
    # A. binary labels, a relevant doc (d9) missing from the run.
    #    relevant at ranks 2 and 4; |R| = 3.
    #    success@3 = 1 (rank 2 ≤ 3); recall@3 = 1/3; recip_rank = 1/2
    #    DCG@3 = 1/log2(3) = 0.6309298; IDCG@3 = 1/1 + 1/log2(3) + 1/log2(4) = 2.1309298
    #    ndcg@3 = 0.6309298 / 2.1309298 = 0.2960819
    (
        "A@3",
        ["d1", "d2", "d3", "d4", "d5"],
        {"d2": 1, "d4": 1, "d9": 1},
        3,
        1.0,
        1 / 3,
        1 / 2,
        (1 / L3) / (1 + 1 / L3 + 1 / 2),
    ),
    #    same run at k=5: recall@5 = 2/3
    #    DCG@5 = 1/log2(3) + 1/log2(5) = 0.6309298 + 0.4306766 = 1.0616064
    #    IDCG@5 = IDCG@3 (only three relevant docs) = 2.1309298 → ndcg@5 = 0.4981879
    (
        "A@5",
        ["d1", "d2", "d3", "d4", "d5"],
        {"d2": 1, "d4": 1, "d9": 1},
        5,
        1.0,
        2 / 3,
        1 / 2,
        (1 / L3 + 1 / L5) / (1 + 1 / L3 + 1 / 2),
    ),
    # B. graded labels; b is judged 0 (not relevant); z (grade 2) is missing from the run.
    #    success@3 = 1; recall@3 = |{a, c}| / |{a, c, z}| = 2/3; recip_rank = 1 (a is rank 1)
    #    DCG@3 = 1/1 + 0/log2(3) + 3/log2(4) = 1 + 1.5 = 2.5
    #    IDCG@3 = 3/1 + 2/log2(3) + 1/log2(4) = 3 + 1.2618595 + 0.5 = 4.7618595
    #    ndcg@3 = 2.5 / 4.7618595 = 0.5250048
    (
        "B@3",
        ["a", "b", "c"],
        {"a": 1, "b": 0, "c": 3, "z": 2},
        3,
        1.0,
        2 / 3,
        1.0,
        2.5 / (3 + 2 / L3 + 1 / 2),
    ),
    #    B at k=1: success@1 = 1; recall@1 = 1/3; DCG@1 = 1; IDCG@1 = 3 → ndcg@1 = 1/3
    ("B@1", ["a", "b", "c"], {"a": 1, "b": 0, "c": 3, "z": 2}, 1, 1.0, 1 / 3, 1.0, 1 / 3),
    # C. k larger than the run (trec_eval: "cutoffs not achieved" keep the full-run value)
    #    success@10 = 1; recall@10 = 1/1; recip_rank = 1/2
    #    DCG = 2/log2(3) = 1.2618595; IDCG = 2/1 = 2 → ndcg@10 = 0.6309298
    ("C@10", ["x", "y"], {"y": 2}, 10, 1.0, 1.0, 1 / 2, (2 / L3) / 2),
    # D. nothing relevant retrieved: every measure 0
    ("D@5", ["p", "q"], {"r": 1}, 5, 0.0, 0.0, 0.0, 0.0),
    # E. ties: the list order is the ranking (equal scores keep the run's order), so the
    #    relevant t2 listed second is rank 2: recip_rank = 1/2, ndcg@2 = (1/log2 3)/1
    ("E@2", ["t1", "t2"], {"t2": 1}, 2, 1.0, 1.0, 1 / 2, 1 / L3),
    # F. the perfect ranking of graded docs: ndcg = 1
    #    DCG = 3/1 + 2/log2(3) = IDCG → 1.0
    ("F@2", ["h", "m", "l"], {"h": 3, "m": 2, "l": 1}, 2, 1.0, 2 / 3, 1.0, 1.0),
]


@pytest.mark.parametrize(
    ("label", "ranked", "qrels", "k", "success", "recall", "rr", "ndcg"),
    TABLE,
    ids=[row[0] for row in TABLE],
)
def test_trec_eval_table(
    label: str,
    ranked: list[str],
    qrels: dict[str, float],
    k: int,
    success: float,
    recall: float,
    rr: float,
    ndcg: float,
) -> None:
    assert retrieval.hit_rate(ranked, qrels, k) == pytest.approx(success, abs=1e-12)
    assert retrieval.recall(ranked, qrels, k) == pytest.approx(recall, abs=1e-12)
    assert retrieval.mrr(ranked, qrels) == pytest.approx(rr, abs=1e-12)
    assert retrieval.ndcg(ranked, qrels, k) == pytest.approx(ndcg, abs=1e-12)


def test_decimal_values_of_the_table() -> None:
    # the same numbers as decimals, as trec_eval prints them (4 places)
    assert (
        round(
            retrieval.ndcg(["d1", "d2", "d3", "d4", "d5"], {"d2": 1, "d4": 1, "d9": 1}, 3) or 0, 4
        )
        == 0.2961
    )
    assert (
        round(
            retrieval.ndcg(["d1", "d2", "d3", "d4", "d5"], {"d2": 1, "d4": 1, "d9": 1}, 5) or 0, 4
        )
        == 0.4982
    )
    assert (
        round(retrieval.ndcg(["a", "b", "c"], {"a": 1, "b": 0, "c": 3, "z": 2}, 3) or 0, 4)
        == 0.5250
    )


def test_tie_order_matters_as_given() -> None:
    assert retrieval.mrr(["t2", "t1"], {"t2": 1}) == 1.0
    assert retrieval.mrr(["t1", "t2"], {"t2": 1}) == 0.5


def test_mrr_cutoff() -> None:
    # first relevant at rank 3: recip_rank = 1/3, but with k = 2 it is not found → 0
    assert retrieval.mrr(["a", "b", "c"], {"c": 1}) == pytest.approx(1 / 3)
    assert retrieval.mrr(["a", "b", "c"], {"c": 1}, k=2) == 0.0


def test_no_relevant_is_undefined_not_zero() -> None:
    for fn in (retrieval.hit_rate, retrieval.recall, retrieval.ndcg):
        assert fn(["a"], {}, 5) is None
        assert fn(["a"], {"a": 0, "b": -1}, 5) is None
    assert retrieval.mrr(["a"], {}) is None


def test_bad_input_is_an_error() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        retrieval.hit_rate(["a", "a"], {"a": 1}, 5)
    with pytest.raises(ValueError, match="positive"):
        retrieval.ndcg(["a"], {"a": 1}, 0)
