"""The trend page in a real headless Chromium (tests/support/browser.py), served by
`rag view` over a nightly archive (tests/support/trend_archive.py): whole runs only (the
shard partials are left out and said so), one line per candidate model, dates on the x
axis, and the filter hides another model's line and rows, another suite, another metric."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import browser as browser_support
from tests.support.trend_archive import MODELS, write_archive

browser = browser_support.browser  # pytest fixtures: a real headless Chromium
page = browser_support.page


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, list[str]]]]:
    from app.view.server import serve_in_thread

    folder = tmp_path_factory.mktemp("nightly")
    ids = write_archive(folder)
    srv, url = serve_in_thread(folder)
    try:
        yield url, ids
    finally:
        srv.shutdown()
        srv.server_close()


def test_trend_draws_merged_runs_per_model_on_dates_and_filters(
    page, archive, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    url, ids = archive
    page.goto(url.rstrip("/") + "/trend")
    full = page.locator('section[data-suite="full"]')
    series = full.locator("svg g.series")
    assert sorted(series.evaluate_all("els => els.map(e => e.dataset.model)")) == sorted(MODELS)
    dates = full.locator("svg text.date").all_text_contents()
    assert dates == ["2026-11-28", "2026-11-29", "2026-11-30"]
    rows = full.locator("tbody tr")
    assert rows.count() == 6  # 2 models x 3 nights; the 4 shard partials are not rows
    body = page.locator("main").inner_text()
    drawn = page.locator("tbody tr td:nth-child(3)").all_text_contents()
    drawn += page.locator("svg circle title").all_text_contents()
    assert drawn and not [t for t in drawn for shard in ids["shard"] if shard in t]
    assert "4 shard report(s) left out" in body
    page.screenshot(path=str(tmp_path / "trend.png"), full_page=True)

    page.select_option("#trend-model", MODELS[1])
    visible = [s for s in series.all() if s.is_visible()]
    assert [s.get_attribute("data-model") for s in visible] == [MODELS[1]]
    assert full.locator("tbody tr:visible").count() == 3
    assert all(
        t == MODELS[1] for t in full.locator("tbody tr:visible td:nth-child(2)").all_text_contents()
    )

    page.select_option("#trend-model", "")
    page.select_option("#trend-suite", "smoke")
    assert not full.is_visible() and page.locator('section[data-suite="smoke"]').is_visible()
    page.select_option("#trend-suite", "")
    page.fill("#trend-metric", "no-such-metric")
    assert not full.locator("details.trend-metric").first.is_visible()
    page.fill("#trend-metric", "correct")
    assert full.locator("details.trend-metric").first.is_visible()
