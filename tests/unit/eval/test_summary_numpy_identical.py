"""A real run's summary is the one np.quantile and one-matrix-sized bootstrap chunks give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.eval.report.io import load_report
from app.eval.report.summary import digest, summary_parts
from app.eval.scoring.table import specs
from app.eval.stats import describe as d
from tests.support.reports import run_smoke


def _np_quantiles(arr: object, qs: object) -> list[float]:
    return [float(x) for x in np.quantile(np.asarray(arr, dtype=float), list(qs))]  # type: ignore[call-overload]


def test_the_runs_summary_is_the_np_quantile_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = load_report(run_smoke(tmp_path, 12))
    metric_specs = {name: s for name, s in specs().items() if name in report.summary}
    judges = sorted(n for n, s in metric_specs.items() if s.kind == "judge")
    digests = [digest(c, judges, report.meta.thresholds.bad_judge_score) for c in report.cases]
    monkeypatch.setattr(d, "quantiles", _np_quantiles)
    monkeypatch.setattr(d, "BOOTSTRAP_CHUNK_CELLS", 2000 * len(digests))  # one matrix
    again = summary_parts(digests, metric_specs, report.meta.seed).summary
    assert report.summary.keys() == again.keys()
    assert any(dist.ci95 for dist in again.values())
    for name, dist in report.summary.items():
        assert dist.model_dump_json() == again[name].model_dump_json(), name
