"""The runner reads its cases from the dataset file as it takes them: at any moment it holds
the cases in flight (twice the concurrency), not the dataset."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from app.eval.config import RunConfig
from app.eval.datasets.case import Case
from app.eval.datasets.index import CaseIndex
from app.eval.run.runner import run_sync
from app.paths import datasets_dir


def test_the_run_holds_the_cases_in_flight_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs: list[weakref.ref[Case]] = []
    most = [0]
    read = CaseIndex.read

    def counted(self: CaseIndex, positions: Iterable[int]) -> Iterator[Case]:
        for case in read(self, positions):
            refs.append(weakref.ref(case))
            most[0] = max(most[0], sum(1 for r in refs if r() is not None))
            yield case

    def whole(self: CaseIndex, positions: Iterable[int] | None = None) -> None:
        raise AssertionError("the run read every case into a Suite")

    monkeypatch.setattr(CaseIndex, "read", counted)
    monkeypatch.setattr(CaseIndex, "suite", whole)
    smoke = sorted(datasets_dir().glob("smoke_v*.jsonl"))[-1]
    config = RunConfig(
        suite="smoke", dataset_path=str(smoke), limit=40, concurrency=2, workers=1, cache=False
    )
    out = run_sync(config, write=False, runs_root=tmp_path / "runs")
    assert out.summary.totals.cases_done == 40
    assert most[0] <= 2 * 2 + 2, most[0]  # 4 workers' cases, the one being read, one spare
