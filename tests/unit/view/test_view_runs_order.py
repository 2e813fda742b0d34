"""The runs list is newest first, and "compare" takes the older of two ticked runs as the base:
two runs that end within the same second (``created_at`` has whole seconds) must still be in
the order they were written, not in the order of their run ids' random suffixes."""

from __future__ import annotations

import os
from pathlib import Path

from app.view.model import RunStore
from tests.support.reports import case, report
from tests.support.reports import info as metric_info


def test_runs_ending_in_the_same_second_are_newest_first_by_when_they_were_written(
    tmp_path: Path,
) -> None:
    metrics = {"correctness": metric_info()}
    one = case("q1", {"correctness": 1.0})
    # the older run's random suffix sorts after the newer one's
    older = report([one], metrics, run_id="20261205T171058Z-973cbc")
    newer = report([one], metrics, run_id="20261205T171058Z-54ef25")
    assert older.created_at == newer.created_at
    stamp = 1_800_000_000_000_000_000
    for n, r in enumerate((older, newer)):
        path = tmp_path / f"eval_{r.run_id}.json"
        path.write_text(r.model_dump_json(), encoding="utf-8")
        os.utime(path, ns=(stamp + n * 1_000_000, stamp + n * 1_000_000))
    keys = [e.key for e in RunStore(tmp_path).entries()]
    assert keys == [newer.run_id, older.run_id]
