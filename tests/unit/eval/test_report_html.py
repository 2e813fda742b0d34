"""The HTML run page (app.view) draws each metric's histogram next to its mean (seed 004: not the mean alone)."""

from __future__ import annotations

from app.eval.report.records import Histogram
from app.eval.report.render import bars


def h(edges: list[float], counts: list[int]) -> Histogram:
    return Histogram(edges=edges, counts=counts)


def test_bars_are_proportional_to_counts_with_a_stub_for_empty_bins() -> None:
    drawn = bars(h([1.0, 2.0, 3.0, 4.0], [2, 0, 8]), max_height=24)
    # heights: 24 * 2/8 = 6, empty bin -> 1 px stub, 24 * 8/8 = 24
    assert [b["height"] for b in drawn] == [6, 1, 24]
    assert [b["title"] for b in drawn] == ["[1, 2): 2", "[2, 3): 0", "[3, 4): 8"]


def test_no_bars_without_a_usable_histogram() -> None:
    assert bars(None) == []
    assert bars(h([], [])) == []
    assert bars(h([0.0, 1.0], [0])) == []  # nothing counted
    assert bars(h([0.0, 1.0], [1, 2])) == []  # inconsistent shape


def test_the_run_page_lists_every_case_with_the_reports_own_bad_cases() -> None:
    import json
    import re
    from pathlib import Path

    from app.eval.report.io import load_report
    from app.view.pages import run_page

    report = load_report(Path(__file__).parents[2] / "data" / "reports" / "v1_adversarial.json")
    page = run_page(report, {c.id: f"{c.id}.html" for c in report.cases})
    rows = json.loads(re.search(r'id="rows">(.*?)</script>', page, re.S)[1])  # type: ignore[index]
    assert [row["id"] for row in rows] == [c.id for c in report.cases]
    adv2 = next(row for row in rows if row["id"] == "adv-002")
    # adv-002: a judge score and a refusal error, both quality reasons (not hard failures)
    assert adv2["verdict"] == "bad-quality"
    assert adv2["why"] == ["correctness = 1.00 < 3", "refusal error (false_refusal)"]
    assert page.count('<td class="hist"><span style="height:') == sum(
        1 for d in report.summary.values() if d.histogram.counts and max(d.histogram.counts)
    )
