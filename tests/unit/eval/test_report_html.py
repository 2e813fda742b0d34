"""The HTML report draws each metric's histogram next to its mean (seed 004: not the mean alone)."""

from __future__ import annotations

from app.eval.records import Histogram
from app.eval.render import bars


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


def test_the_page_shows_the_reports_own_bad_cases_and_every_case() -> None:
    from pathlib import Path

    from app.eval.render import render_html
    from app.eval.report import load_report

    report = load_report(Path(__file__).parents[2] / "data" / "reports" / "v1_adversarial.json")
    page = render_html(report)
    assert f"<h2>Bad cases ({len(report.bad_cases)})</h2>" in page
    # adv-002: a judge score and a refusal error, both quality reasons (not marked as fails)
    assert (
        '<a href="#adv-002">adv-002</a>: <span class="">correctness = 1.00 &lt; 3</span>; '
        '<span class="">refusal error (false_refusal)</span>'
    ) in page
    assert all(f'<details id="{c.id}">' in page for c in report.cases)
    assert page.count('<td class="hist"><span style="height:') == sum(
        1 for d in report.summary.values() if d.histogram.counts and max(d.histogram.counts)
    )


def test_a_hard_reason_is_marked_as_a_failure() -> None:
    from app.eval.render import render_html
    from tests.support import reports as r

    leak = r.info("lower", red_line=True)
    report = r.report(
        [r.case("kb-001", {"acl_leak": 1.0}, red_lines=["acl_leak"])], {"acl_leak": leak}
    )
    page = render_html(report)
    assert '<a href="#kb-001">kb-001</a>: <span class="fail">red line acl_leak</span>' in page
    assert '<span class="fail">RED LINE acl_leak</span>' in page
