"""The ``rag`` process's GC setting (app/runtime.py): applied by the entry point only."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.runtime import GEN0_THRESHOLD, tune_gc


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_raises_the_default_gen0_threshold_and_keeps_the_older_generations() -> None:
    gc.set_threshold(700, 7, 9)
    tune_gc()
    assert gc.get_threshold() == (10_000, 7, 9)
    assert GEN0_THRESHOLD == 10_000


@pytest.mark.parametrize("setting", [(50_000, 10, 10), (0, 10, 10)])
def test_a_higher_threshold_or_a_disabled_collector_is_left_alone(
    setting: tuple[int, int, int],
) -> None:
    gc.set_threshold(*setting)
    tune_gc()
    assert gc.get_threshold() == setting


def test_the_entry_point_applies_it() -> None:
    import app.cli

    gc.set_threshold(700, 10, 10)
    assert gc.get_threshold()[0] == 700
    with pytest.raises(SystemExit) as exc:
        app.cli.main(["--help"])
    assert exc.value.code == 0
    assert gc.get_threshold() == (GEN0_THRESHOLD, 10, 10)
