"""An honest first run in the markdown summary and the terminal line: a cost the price table
cannot know is "unpriced", never $0.0000; a metric without data is "no data", not FAIL."""

from __future__ import annotations

from app.llm.engine import EngineStats
from tests.support import reports as r


def _report(unpriced: int, cost: float = 0.0) -> r.Report:
    m = {"rewrite_accuracy": r.info(), "correctness": r.info(kind="judge", unit="score", scale="continuous")}  # fmt: skip
    cases = [r.case("kb-001", {"rewrite_accuracy": r.score(None, "no golden_rewrite"), "correctness": 4.0})]  # fmt: skip
    report = r.report(cases, m, verdicts={"rewrite_accuracy": r.verdict("rewrite_accuracy", "no_data")})  # fmt: skip
    engine = EngineStats(calls=3, completions=3, unpriced_calls=unpriced, cost_usd=cost)
    totals = report.totals.model_copy(update={"engine": engine, "cost_usd": cost})
    return report.model_copy(update={"totals": totals})


def test_markdown_says_unpriced_not_zero_dollars() -> None:
    from app.eval.report.render import cost_text, render_markdown

    page = render_markdown(_report(unpriced=3))
    assert "$0.0000" not in page and "unpriced (3 call(s) to a model without a price)" in page
    assert cost_text(_report(unpriced=0).totals) == "$0.0000"  # offline: nothing to pay
    assert cost_text(_report(unpriced=1, cost=0.25).totals) == (
        "$0.2500 + unpriced (1 call(s) to a model without a price)"
    )


def test_a_metric_without_data_is_no_data_not_fail() -> None:
    from app.eval.report.render import summary_rows

    rows = {row[0]: row for row in summary_rows(_report(unpriced=0))}
    assert rows["rewrite_accuracy"][-1] == "· no data"
    assert "FAIL" not in " ".join(rows["rewrite_accuracy"])
