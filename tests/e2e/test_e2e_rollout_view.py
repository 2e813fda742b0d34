"""The viewer's /rollout page in a real headless Chromium: a staged rollout's stage, the
promotion refused before the stage's minimum time, the A/B of its arms with a planted worse
candidate flagged ❌ and the 👎 trend per arm; then `rag prompts canary --abort` and, after a
promotion, `rag prompts rollback` — each seen on the page after a reload."""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.generation.registry import build_registry, default_root
from app.generation.registry.authoring import lock, new_version
from app.generation.registry.releases import utc_iso
from tests.support import browser as browser_support

browser = browser_support.browser
page = browser_support.page

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import simulate_traffic  # noqa: E402

PID = "system/kb_qa"


def _rag(*args: str) -> int:
    from app.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0)


@pytest.fixture
def lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RAG_PROMPT_PIN", raising=False)
    root = tmp_path / "prompts"
    shutil.copytree(default_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
    path = new_version(build_registry(root), PID, author="tester")
    path.write_text(
        path.read_text(encoding="utf-8").replace("TODO 描述本次变更", "拒答更明确"), "utf-8"
    )
    lock(build_registry(root), ("system/kb_qa_v3",))
    (root / "releases.toml").write_text(
        (root / "releases.toml").read_text(encoding="utf-8")
        + '\n[rollout]\nstages = [{ name = "canary", percent = 10, min_minutes = 120 },'
        ' { name = "full", percent = 100, min_minutes = 0, min_answers = 0 }]\n',
        encoding="utf-8",
    )
    return root


def test_rollout_page_status_refusal_ab_abort_and_rollback(
    page: Any, lib: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.view.server import serve_in_thread

    started = datetime.now(UTC) - timedelta(minutes=60)
    assert _rag("prompts", "canary", PID, "v3", "--root", str(lib), "--now", utc_iso(started)) == 0
    log = tmp_path / "answers.jsonl"
    simulate_traffic.main(
        ["--out", str(log), "--root", str(lib), "--start", utc_iso(started),
         "--hours", "1", "--users", "3000", "--seed", "5", "--candidate-down-rate", "0.12"]
    )  # fmt: skip
    reports = tmp_path / "reports"
    reports.mkdir()
    srv, url = serve_in_thread(reports, prompts_root=lib, answer_log=log)
    try:
        page.goto(url + "/")
        page.locator("nav a:text-is('rollouts')").click()
        page.wait_for_url("**/rollout")
        section = page.locator("section.rollout[data-prompt='system/kb_qa']")
        assert "v3 at 10 %" in section.locator("h2").inner_text()
        assert "stage canary (1/2)" in section.locator("p.stage").inner_text()
        refused = section.locator(".next.refused").inner_text()
        assert "promotion to full is refused now" in refused
        assert "of ≥ 2.0 h in canary" in refused  # before the stage's minimum time
        assert "❌ the candidate is worse on 👎 rate" in refused
        row = section.locator("table.ab tr[data-metric='thumbs_down_rate']")
        assert "❌ significant regression" in row.locator("td.verdict").inner_text()
        trend = section.locator("svg#ab-trend")
        assert trend.locator("polyline.arm-control").count() == 1
        assert trend.locator("polyline.arm-candidate").count() == 1
        page.screenshot(path=str(tmp_path / "viewer-rollout.png"), full_page=True)

        # abort from the CLI: the page shows no rollout, v2 active
        assert _rag("prompts", "canary", PID, "--abort", "--root", str(lib)) == 0
        page.reload()
        assert page.locator("#no-rollout").count() == 1
        assert page.locator("#steady tr[data-prompt='system/kb_qa'] td.active").inner_text() == "v2"

        # a promotion through the (one-stage-left) plan, then the one-line rollback
        assert _rag("prompts", "canary", PID, "v3", "--root", str(lib)) == 0
        releases = lib / "releases.toml"
        releases.write_text(
            releases.read_text(encoding="utf-8").replace(
                'stage = "canary", percent = 10', 'stage = "full", percent = 100'
            ),
            encoding="utf-8",
        )
        assert (
            _rag("prompts", "canary", PID, "--promote", "--root", str(lib), "--log", str(log)) == 0
        )
        page.reload()
        assert page.locator("#steady tr[data-prompt='system/kb_qa'] td.active").inner_text() == "v3"
        assert _rag("prompts", "rollback", PID, "--root", str(lib)) == 0
        page.reload()
        assert page.locator("#steady tr[data-prompt='system/kb_qa'] td.active").inner_text() == "v2"
    finally:
        srv.shutdown()
        srv.server_close()
    capsys.readouterr()
