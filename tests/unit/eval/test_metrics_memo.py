"""The per-case shortcuts of the deterministic metrics give the scores the plain
computation gives: the retrieval metrics' shared (run, qrels) of the case being scored
(never a previous case's), a plain undefined score (one frozen value per reason), and the
ACL check made with the case's groups once (kb.can_read per chunk)."""

from __future__ import annotations

import math
from itertools import product

from app.eval.datasets.case import Case
from app.eval.scoring import retrieval
from app.eval.scoring.base import MetricContext, Observation, Score
from app.eval.scoring.table import score_case
from app.retrieval.kb import can_read, held_groups, readable

ACL = {"k:a#0": ("employee",), "k:b#0": ("finance",), "k:c#0": ("public",), "k:d#0": ("hr",)}


def _case(cid: str, golden: list[str], acceptable: list[str], acl: list[str]) -> Case:
    return Case.model_validate(
        {
            "id": cid,
            "question": "q",
            "golden_answer": "a",
            "golden_chunk_ids": golden,
            "acceptable_chunk_ids": acceptable,
            "acl": acl,
            "tags": ["hr"],
            "annotator": "t",
        }
    )


def test_retrieval_metrics_of_alternating_cases_are_each_cases_own() -> None:
    a = _case("t-a", ["k:a#0"], [], ["employee"])
    b = _case("t-b", ["k:b#0"], ["k:c#0"], ["finance"])
    obs_a = Observation("x", False, retrieved=("k:c#0", "k:a#0", "k:c#0"))
    obs_b = Observation("y", False, retrieved=("k:b#0", "k:d#0"))
    ctx = MetricContext(k=5, chunk_acl=ACL)
    names = ("hit_rate", "recall", "mrr", "ndcg")
    for c, o in [(a, obs_a), (b, obs_b), (a, obs_a), (a, obs_b), (b, obs_a)]:
        got = score_case(c, o, ctx, names)
        run = list(dict.fromkeys(o.retrieved))
        rels = {x: 1.0 for x in c.acceptable_chunk_ids} | {x: 2.0 for x in c.golden_chunk_ids}
        assert got["hit_rate"].value == retrieval.hit_rate(run, rels, 5)
        assert got["recall"].value == retrieval.recall(run, rels, 5)
        assert got["mrr"].value == retrieval.mrr(run, rels)
        assert got["ndcg"].value == retrieval.ndcg(run, rels, 5)
    # by hand for (a, obs_a): run [c, a], a golden at rank 2
    got = score_case(a, obs_a, ctx, names)
    assert got["mrr"].value == 0.5
    assert math.isclose(got["ndcg"].value or 0.0, (2 / math.log2(3)) / 2.0)


def test_a_plain_undefined_score_is_what_validation_makes() -> None:
    first = Score.undefined("no golden_rewrite")
    assert first == Score(value=None, reason="no golden_rewrite")
    assert (
        first.model_dump_json() == Score(value=None, reason="no golden_rewrite").model_dump_json()
    )
    assert Score.undefined("no golden_rewrite") == first
    with_errors = Score.undefined("pipeline error: x", n_errors=1)
    assert with_errors.n_errors == 1 and with_errors.reason == "pipeline error: x"
    assert Score.undefined("pipeline error: x").n_errors == 0


def test_readable_with_held_groups_is_can_read() -> None:
    groups = ["employee", "finance", "public", "hr", "admin"]
    for n, m in product(range(3), range(3)):
        for user in product(groups, repeat=n):
            for doc in product(groups, repeat=m):
                assert readable(held_groups(user), doc) == can_read(user, doc), (user, doc)


def test_a_shared_score_is_what_validation_makes() -> None:
    # Score.shared: one frozen value per (value, detail key, detail value), equal to (and
    # written as) the score validation makes; each distinct outcome is its own score
    first = Score.shared(1.0, "retrieved", 4)
    plain = Score(value=1.0, detail={"retrieved": 4})
    assert first == plain and first.model_dump_json() == plain.model_dump_json()
    assert Score.shared(1.0, "retrieved", 4) is first
    assert Score.shared(1, "retrieved", 4).value == 1.0  # an int rate: the float field's value
    assert Score.shared(1.0, "retrieved", 5).detail == {"retrieved": 5}
    assert Score.shared(0.5, "retrieved", 4).value == 0.5
    assert Score.shared(0.0, "cell", "true_answer").detail == {"cell": "true_answer"}
    assert Score.shared(0.0, "cell", "true_refusal").detail == {"cell": "true_refusal"}
    nan = Score.shared(math.nan, "retrieved", 4)  # never equal to itself: made each time
    assert math.isnan(nan.value or 0.0) and nan.model_dump_json().startswith('{"value":NaN')


def test_refusal_error_cells_and_retrieval_details() -> None:
    # the metrics that return shared scores still give each case its own cell and count
    expect = {(True, True): "true_refusal", (True, False): "missed_refusal"}
    expect |= {(False, True): "false_refusal", (False, False): "true_answer"}
    ctx = MetricContext(k=5, chunk_acl=ACL)
    for (expected, refused), cell in expect.items():
        case = _case("t-r", ["k:a#0"], [], ["employee"]).model_copy(
            update={"expected_refusal": expected}
        )
        obs = Observation("x", refused, retrieved=("k:a#0", "k:c#0")[: 1 + refused])
        got = score_case(case, obs, ctx, ("refusal_error", "hit_rate", "recall"))
        assert got["refusal_error"].detail == {"cell": cell}
        assert got["refusal_error"].value == (
            1.0 if cell in ("false_refusal", "missed_refusal") else 0.0
        )
        assert got["hit_rate"].detail == {"retrieved": 1 + refused} and got["hit_rate"].value == 1.0
