"""The HTML report draws each metric's histogram next to its mean (seed 004: not the mean alone)."""

from __future__ import annotations

from app.cli.report import _bars


def test_bars_are_proportional_to_counts_with_a_stub_for_empty_bins() -> None:
    bars = _bars({"edges": [1.0, 2.0, 3.0, 4.0], "counts": [2, 0, 8]}, max_height=24)
    # heights: 24 * 2/8 = 6, empty bin -> 1 px stub, 24 * 8/8 = 24
    assert [b["height"] for b in bars] == [6, 1, 24]
    assert [b["title"] for b in bars] == ["[1, 2): 2", "[2, 3): 0", "[3, 4): 8"]


def test_no_bars_without_a_usable_histogram() -> None:
    assert _bars(None) == []
    assert _bars({"edges": [], "counts": []}) == []
    assert _bars({"edges": [0.0, 1.0], "counts": [0]}) == []  # nothing counted
    assert _bars({"edges": [0.0, 1.0], "counts": [1, 2]}) == []  # inconsistent shape
