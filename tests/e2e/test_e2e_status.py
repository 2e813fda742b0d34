"""One status per run, in a real browser: ``make eval``'s run, a partial run and a merge of
shards, each made by the real ``rag`` command, show in ``rag view`` (runs list and run page)
and in the static export exactly the status line the console printed — coloured pass or fail
as the exit code says. Before, the console said PASS, the ``.md`` FAIL and the viewer marked
the run red "fail"."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.paths import PACKAGE_DIR
from tests.support import browser as browser_support

browser = browser_support.browser  # pytest fixtures: a real headless Chromium
page = browser_support.page

REPO = PACKAGE_DIR.parent


def _make_eval_args() -> list[str]:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    found = re.search(r"^EVAL_ARGS := (.+)$", makefile, re.MULTILINE)
    assert found is not None
    return shlex.split(found.group(1))


def _rag(folder: Path, *args: str) -> tuple[int, str, Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "ANTHROPIC_"))}
    env.update(RAG_CACHE_DIR=str(folder / "cache"), RAG_LOG_DIR=str(folder / "logs"))
    proc = subprocess.run(
        [sys.executable, "-m", "app", *args, "--out", str(folder / "tmp")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (line,) = [s for s in proc.stdout.splitlines() if s.startswith("status: ")]
    (path,) = (folder / "tmp").glob("eval_*.json")
    runs = folder / "runs"
    runs.mkdir(exist_ok=True)
    for suffix in (".json", ".md"):
        path.with_suffix(suffix).rename(runs / path.with_suffix(suffix).name)
    return proc.returncode, line.removeprefix("status: "), runs / path.name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """``{name: (exit code, console status line, report path)}`` of three real runs."""
    folder = tmp_path_factory.mktemp("status")
    made: dict[str, Any] = {}
    made["make eval"] = _rag(folder, *_make_eval_args(), "--quiet")
    made["partial"] = _rag(folder, *_make_eval_args(), "--max-cost", "0", "--quiet")
    shards = []
    for i in (1, 2):
        code, _, path = _rag(folder, *_make_eval_args(), "--limit", "6", "--shard", f"{i}/2")
        assert code == 0
        shards.append(path)
    for path in shards:  # a shard is not a run of its own in the list below
        path.rename(folder / path.name)
        path.with_suffix(".md").unlink()
    made["merge"] = _rag(folder, "eval", "merge", *(str(folder / p.name) for p in shards))
    return folder / "runs", made


@pytest.fixture(scope="module")
def server(runs: tuple[Path, dict[str, Any]]) -> Iterator[str]:
    from app.view.server import serve_in_thread

    srv, url = serve_in_thread(runs[0])
    try:
        yield url
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_viewer_shows_the_console_status(
    page: Any, server: str, runs: tuple[Path, dict[str, Any]]
) -> None:
    _, made = runs
    expected = {
        "make eval": (0, "PASS — red lines held (acl_leak); quality not gated (offline baseline)"),
        "merge": (0, "PASS — red lines held (acl_leak); quality not gated (offline baseline)"),
        "partial": (1, "PARTIAL — 0 of 43 cases run (--max-cost"),
    }
    page.goto(server + "/")
    assert page.locator("#runs tbody tr").count() == 3
    for name, (code, line, path) in made.items():
        want_code, want_start = expected[name]
        assert code == want_code and line.startswith(want_start), (name, code, line)
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["status_line"] == line
        assert path.with_suffix(".md").read_text(encoding="utf-8").splitlines()[0].endswith(line)
        colour = "pass" if code == 0 else "fail"
        row = page.locator("#runs tbody tr", has=page.locator(f"a:text-is('{data['run_id']}')"))
        cell = row.locator("td.status")
        assert cell.inner_text() == line
        assert colour in (cell.get_attribute("class") or "").split()
        page.goto(f"{server}/run/{data['run_id']}")
        badge = page.locator("#status")
        assert badge.inner_text() == line
        assert colour in (badge.get_attribute("class") or "").split()
        page.goto(server + "/")


def test_the_static_export_shows_the_console_status(
    page: Any, runs: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    from app.view.export import export_run
    from app.view.stream import read_cases

    _, made = runs
    _, line, path = made["make eval"]
    out = tmp_path / "site" / "run.html"
    export_run(read_cases(path), out)
    page.goto(out.as_uri())
    assert page.locator("#status").inner_text() == line
    assert "pass" in (page.locator("#status").get_attribute("class") or "").split()
