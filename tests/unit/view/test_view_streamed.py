"""The viewer's readers at scale: `rag report html` and `rag view`'s run page read a
line-layout report as a stream (no case held beyond the one in hand), tested on small ones."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.big_report import write_big_report
from tests.support.reports import run_smoke


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_smoke(tmp_path_factory.mktemp("smoke"), 8)


@pytest.fixture(scope="module")
def big(smoke: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_big_report(smoke, tmp_path_factory.mktemp("big") / "eval_big.json", 230)


def test_report_html_holds_one_case_at_a_time_and_writes_every_file(
    big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.view.export as export
    from app.view.stream import read_cases

    monkeypatch.setattr(export, "ROWS_PER_FILE", 50)
    monkeypatch.setattr(export, "CASES_PER_FILE", 20)
    data = read_cases(big)
    alive: list[weakref.ref[object]] = []
    most = [0]

    def watched(cases: Iterator[object]) -> Iterator[object]:
        for case in cases:
            alive.append(weakref.ref(case))
            most[0] = max(most[0], sum(r() is not None for r in alive))
            yield case

    data.cases = watched(iter(data.cases))
    written = export.export_run(data, tmp_path / "run.html")
    names = {p.name for p in written}
    assert {f"rows-{k}.js" for k in range(5)} <= names and "rows-5.js" not in names
    assert {f"c-{k}.js" for k in range(12)} <= names and "c-12.js" not in names
    assert data.read == 230
    assert most[0] <= 2  # the case in hand (and the one before it, until it is dropped)


def test_the_run_index_is_built_once_beside_the_report_and_rebuilt_when_it_changes(
    big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import shutil

    import app.view.index as run_index

    report = tmp_path / "eval_copy.json"
    shutil.copyfile(big, report)
    first = run_index.open_index(report)
    assert first.folder.parent == tmp_path / ".rag-view" and first.total == 230

    def no_build(*_: object) -> None:
        raise AssertionError("rebuilt")

    with monkeypatch.context() as mp:
        mp.setattr(run_index, "build", no_build)
        assert run_index.open_index(report).total == 230  # read from disk, not rebuilt
    st = report.stat()
    os.utime(report, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = run_index.open_index(report)
    assert second.folder != first.folder and not first.folder.exists()  # the old one removed


def test_a_page_of_the_index_reads_its_rows_only_and_no_case(
    big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.eval.report.stream as report_stream
    import app.view.index as run_index
    import app.view.stream as view_stream
    from app.eval.report.io import load_report

    cases = load_report(big).cases
    index = run_index.open_index(big)

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a case was decoded")

    monkeypatch.setattr(report_stream, "decode_case", refuse)
    monkeypatch.setattr(view_stream, "decode_case", refuse)
    read: list[int] = []
    real = run_index.RunIndex._rows
    monkeypatch.setattr(
        run_index.RunIndex,
        "_rows",
        lambda self, which: read.append(len(which)) or real(self, which),
    )
    got = index.page({"page": "3", "sort": "id"}, lambda cid: "#" + cid)
    assert [r["id"] for r in got.rows] == sorted(c.id for c in cases)[150:200]
    assert got.rows[0]["href"] == "#" + got.rows[0]["id"]
    assert (got.shown, got.total, got.page, got.pages) == (230, 230, 3, 5)
    assert read == [50]
    # no data sorts last either way; ties by id
    down = index.page({"sort": "latency_ms", "dir": "-1", "page": "0"}, str).rows
    lat = sorted(
        (c for c in cases),
        key=lambda c: (c.trace is None, -(c.trace.latency_ms if c.trace else 0), c.id),
    )
    assert [r["id"] for r in down] == [c.id for c in lat[:50]]
    # a min box as the browser's parseFloat reads it ("4.5x" is 4.5); a case without the
    # value is left out once a bound is set
    name = "correctness"
    high = index.page({"metric": name, "min": "4.5x"}, str)
    want = [c for c in cases if (v := c.value(name)) is not None and v >= 4.5]
    assert high.shown == len(want)


def test_the_viewer_pages_a_large_run_and_opens_a_case_from_its_line(
    big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import re
    import shutil

    import app.eval.report.io as io
    import app.view.index as run_index
    from app.view.server import Viewer

    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copyfile(big, folder / big.name)
    monkeypatch.setattr(run_index, "EMBED_ROWS", 100)
    viewer = Viewer(folder)
    (entry,) = viewer.store.entries()

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the whole report was read")

    monkeypatch.setattr(io, "load_report", refuse)
    status, html = viewer.page(f"/run/{entry.key}")
    assert status == 200 and 'id="rows"' not in html
    spec = json.loads(re.search(r'id="table-spec">(.*?)</script>', html, re.S)[1])  # type: ignore[index]
    assert spec["rows_url"] == f"/run/{entry.key}/rows" and spec["total"] == 230
    status, body, kind = viewer.respond(spec["rows_url"] + "?page=4&q=smoke")
    data = json.loads(body)
    assert (status, kind.split(";")[0]) == (200, "application/json")
    assert (data["shown"], data["page"], len(data["rows"])) == (230, 4, 30)
    cid = data["rows"][0]["id"]
    assert data["rows"][0]["href"] == f"/run/{entry.key}/case/{cid}"
    status, page = viewer.page(data["rows"][0]["href"])
    assert status == 200 and cid in page
    assert viewer.page(f"/run/{entry.key}/case/no-such-case")[0] == 404
