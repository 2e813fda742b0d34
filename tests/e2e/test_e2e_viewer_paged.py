"""`rag view`'s run page of a large run, in a real headless Chromium: its table is paged by
the server (app/view/index.py) instead of embedded. The same run shown both ways — embedded
(filtered and sorted by static/view.js) and paged by the server — gives the same count, the
same rows in the same order for every filter, search, sort and page tried here: the server's
rules are the browser's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support import browser as browser_support

browser = browser_support.browser  # pytest fixtures: a real headless Chromium
page = browser_support.page


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    from app.eval.config import RunConfig
    from app.eval.run.runner import run_sync
    from app.view.server import serve_in_thread
    from scripts.big_report import write_big_report

    folder = tmp_path_factory.mktemp("paged")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_CACHE_DIR", str(folder / "cache"))
        mp.setenv("RAG_LOG_DIR", str(folder / "logs"))
        # in a thread: Playwright's sync API owns this thread's event loop
        with ThreadPoolExecutor(1) as pool:
            config = RunConfig(suite="smoke")
            outcome = pool.submit(
                run_sync, config, out_dir=folder / "small", front_end="cli"
            ).result()
    assert outcome.report is not None
    (small,) = (folder / "small").glob("eval_*.json")
    write_big_report(small, folder / "runs" / "eval_big.json", 260)
    srv, url = serve_in_thread(folder / "runs")
    try:
        yield url, outcome.report.run_id
    finally:
        srv.shutdown()
        srv.server_close()


def _table(page: Any, remote: bool) -> tuple[str, list[str]]:
    if remote:
        page.wait_for_selector("#cases[data-state=ready]")
    ids = page.locator("#cases tbody tr").evaluate_all("trs => trs.map(tr => tr.dataset.id)")
    return page.locator("#count").inner_text(), ids


STEPS: list[tuple[str, Callable[[Any], None]]] = [
    ("opened", lambda p: None),
    ("tag", lambda p: p.select_option("#f-tag", "hr")),
    ("next page", lambda p: p.click("#next")),
    ("bad cases", lambda p: (p.select_option("#f-tag", ""), p.select_option("#f-verdict", "bad"))),
    ("sort by ms", lambda p: p.click("#cases th button[data-sort=latency_ms]")),
    ("sort by ms, down", lambda p: p.click("#cases th button[data-sort=latency_ms]")),
    (
        "all, sort by outcome",
        lambda p: (
            p.select_option("#f-verdict", ""),
            p.click("#cases th button[data-sort=outcome]"),
        ),
    ),
    ("search", lambda p: p.fill("#f-search", "年假")),
    ("search by id", lambda p: p.fill("#f-search", "-000123")),
    (
        "metric at least 4",
        lambda p: (
            p.fill("#f-search", ""),
            p.select_option("#f-metric", "correctness"),
            p.fill("#f-min", "3"),
        ),
    ),
    ("and at most 4.5", lambda p: p.fill("#f-max", "4.5")),
    (
        "difficulty",
        lambda p: (
            p.fill("#f-min", ""),
            p.fill("#f-max", ""),
            p.select_option("#f-difficulty", "hard"),
        ),
    ),
    ("page 2 with the keyboard", lambda p: (p.locator("body").click(), p.keyboard.press("n"))),
]


def test_the_server_pages_the_table_as_the_browser_filters_it(
    page: Any, served: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.view.index as run_index

    url, _ = served
    seen: dict[bool, list[tuple[str, tuple[str, list[str]]]]] = {}
    for remote in (False, True):
        monkeypatch.setattr(run_index, "EMBED_ROWS", 100 if remote else 10_000)
        page.goto(url + "/")
        page.locator("#runs tbody tr a").first.click()
        assert (page.locator("#rows").count() == 0) == remote  # nothing embedded when paged
        got = []
        for name, step in STEPS:
            step(page)
            got.append((name, _table(page, remote)))
        seen[remote] = got
    for (name, embedded), (_, paged) in zip(seen[False], seen[True], strict=True):
        assert paged == embedded, name
    counts = [count for _, (count, _) in seen[False]]
    assert counts[0].startswith("260 of 260 cases · page 1/6")
    assert len(set(counts)) > 6, counts  # the steps did filter
    (only,) = seen[False][8][1][1]
    assert only.endswith("-000123")


def test_a_case_of_a_paged_run_opens_from_its_line(
    page: Any, served: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.eval.report.io as io
    import app.view.index as run_index

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the whole report was read")

    monkeypatch.setattr(run_index, "EMBED_ROWS", 100)
    monkeypatch.setattr(io, "load_report", refuse)
    url, _ = served
    page.goto(url + "/")
    page.locator("#runs tbody tr a").first.click()
    page.wait_for_selector("#cases[data-state=ready]")
    page.fill("#f-search", "-000250")
    page.wait_for_selector("#cases[data-state=ready]")
    assert page.locator("#cases tbody tr").count() == 1
    page.locator("#cases tbody tr a").first.click()
    page.wait_for_url("**/case/*-000250")
    assert page.locator("#question").inner_text().strip()
