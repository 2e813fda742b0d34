"""The metric table is computed once per registry version: a metric registered or removed
after the first lookup is seen by every lookup after it (specs, --metrics selections,
score_case, red lines)."""

from __future__ import annotations

from app.eval.datasets.case import Case
from app.eval.scoring.base import MetricContext, Observation, Score
from app.eval.scoring.registry import REGISTRY, forget, metric
from app.eval.scoring.table import red_line_metrics, score_case, select_metrics, specs


def _temp(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    return Score(value=1.0)


def test_a_metric_registered_later_is_seen_and_a_removed_one_is_gone() -> None:
    before = specs()
    chosen = select_metrics(("deterministic",))
    assert "_tmp_cache_metric" not in before
    assert list(red_line_metrics()) == [n for n, s in before.items() if s.red_line]
    metric(
        "_tmp_cache_metric",
        direction="lower",
        kind="deterministic",
        unit="rate",
        scale="binary",
        group="retrieval",  # sorts before every generation metric
        description="temporary",
        red_line=True,
    )(_temp)
    try:
        after = specs()
        assert "_tmp_cache_metric" in after
        # grouped: after every other retrieval metric, before the first generation one
        names = list(after)
        groups = [after[n].group for n in names]
        assert names.index("_tmp_cache_metric") == groups.index("generation") - 1
        assert "_tmp_cache_metric" in select_metrics(("deterministic",))
        assert "_tmp_cache_metric" in red_line_metrics()
        case = Case.model_validate(
            {
                "id": "t-1",
                "question": "q",
                "golden_answer": "a",
                "acl": ["employee"],
                "tags": ["hr"],
                "annotator": "t",
            }
        )
        obs = Observation(answer="a", refused=False)
        scores = score_case(case, obs, MetricContext(), ("_tmp_cache_metric",))
        assert scores == {"_tmp_cache_metric": Score(value=1.0)}
    finally:
        forget("_tmp_cache_metric")
    assert specs() == before
    assert select_metrics(("deterministic",)) == chosen
    assert "_tmp_cache_metric" not in red_line_metrics()


def test_a_metric_popped_from_the_table_directly_is_gone() -> None:
    specs()  # the table is computed
    spec_fn = REGISTRY.pop("mrr")
    try:
        assert "mrr" not in specs()
        assert "mrr" not in select_metrics(("deterministic",))
    finally:
        REGISTRY["mrr"] = spec_fn
    assert "mrr" in specs()
