"""The trend page draws whole runs only (a shard's report is part of a run: left out and
counted), one line per candidate model and suite, the runs on a date axis."""

from __future__ import annotations

import re
from pathlib import Path

from app.view.model import RunStore
from app.view.trend import trend_data, trend_page
from tests.support.trend_archive import MODELS, write_archive


def test_shard_partials_are_left_out_and_each_model_is_its_own_line(tmp_path: Path) -> None:
    ids = write_archive(tmp_path)
    entries = RunStore(tmp_path).entries()
    assert len(entries) == len(ids["whole"]) + len(ids["shard"])
    data = trend_data(entries)
    assert sorted(data.shards_left_out) == sorted(ids["shard"])
    full = data.series["full"]["correctness"]
    assert sorted(full) == sorted(MODELS)
    for model in MODELS:
        assert len(full[model]) == 3  # three nights, the merged run once
        assert [p["date"][:10] for p in full[model]] == ["2026-11-28", "2026-11-29", "2026-11-30"]
        assert {p["model"] for p in full[model]} == {model}
    assert list(data.series["smoke"]["correctness"]) == [MODELS[0]]
    drawn = {p["run"] for s in data.series.values() for m in s.values() for pts in m.values() for p in pts}  # fmt: skip
    assert not drawn & set(ids["shard"])

    page = trend_page(entries, lambda k: f"/run/{k}")
    full_svg = page.split('data-suite="full"')[1].split("</svg>")[0]
    assert sorted(re.findall(r'<g class="series" data-model="([^"]+)"', full_svg)) == sorted(MODELS)
    dates = re.findall(r'<text class="date"[^>]*>([^<]+)</text>', full_svg)
    assert dates[0] == "2026-11-28" and dates[-1] == "2026-11-30"
    # x follows time: the three nights are evenly spaced, so are their points
    xs = sorted({float(x) for x in re.findall(r'<circle cx="([0-9.]+)"', full_svg)})
    assert len(xs) == 3 and abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.2
    assert "4 shard report(s) left out" in page
    for shard in ids["shard"]:
        assert f"/run/{shard}" not in page
