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
