"""The viewer's readers at scale: `rag report html` and `rag view`'s run page read a
line-layout report as a stream (no case held beyond the one in hand), tested on small ones."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from scripts.big_report import write_big_report


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.cli.eval import cli

    out = tmp_path_factory.mktemp("smoke")
    res = CliRunner().invoke(
        cli, ["run", "--suite", "smoke", "--limit", "8", "--quiet", "--out", str(out)]
    )
    assert res.exit_code in (0, 1), res.output
    (path,) = out.glob("eval_*.json")
    return path


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
