"""The experts' loop in a real headless Chromium, in Chinese (`rag datasets edit --lang zh`):

* the mistakes an expert makes in a list box (the JSON the old help showed, a full-width
  comma) end in the intended items, shown before saving; a bad id gets a Chinese message
  with the Chinese field name; a save without a note is refused in Chinese;
* a save asks once who the expert is, then commits in their name on a change branch, raises
  the changed case's version and shows what the offline pipeline does with the case (golden
  chunk rank, must_include in the golden passage, assembly mode, who can read the chunk);
* "发起合并请求" shows the exact git/gh commands (no gh here);
* an expert labels 20 judged cases blind in the calibration queue; the agreement page and
  `rag judge calibrate` report Cohen's weighted κ equal to scikit-learn's on the same vectors.

The screenshots of the expert guide (docs/datasets.zh.md, docs/datasets.md) are taken here:
``RAG_DOCS_SCREENSHOTS=1`` writes them into docs/img/, otherwise into the test's tmp folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.eval.datasets.commits import git_saves
from app.eval.datasets.editor import EditorState
from app.eval.datasets.editor_http import make_server
from app.eval.report.calibration_queue import CalibrationQueue, calibration_routes, labels_file
from app.retrieval.kb import load_kb
from tests.support.browser import browser, page  # noqa: F401  (pytest fixtures)

ROOT = Path(__file__).resolve().parents[2]
KB_ROOT = ROOT / "tests" / "eval" / "kb" / "sample"
DATASETS = ROOT / "tests" / "eval" / "datasets"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "lead", "GIT_AUTHOR_EMAIL": "lead@x.org"}
    env |= {"GIT_COMMITTER_NAME": "lead", "GIT_COMMITTER_EMAIL": "lead@x.org"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def judged_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real offline smoke run (extractive answers, reference judge): judged cases to label."""
    out = tmp_path_factory.mktemp("reports")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"PYTHONPATH": str(ROOT), "RAG_CACHE_DIR": str(out / ".cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "app", "eval", "run", "--suite", "smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    [report] = sorted(out.glob("eval_*.json"))
    return report


@pytest.fixture
def loop(tmp_path: Path, judged_report: Path) -> Iterator[dict[str, Any]]:
    repo = tmp_path / "repo"
    folder = repo / "tests" / "eval" / "datasets"
    labels = repo / "tests" / "eval" / "calibration"
    folder.mkdir(parents=True)
    labels.mkdir(parents=True)
    for name in ("smoke_v1.0.jsonl", "CHANGELOG.md"):
        shutil.copy(DATASETS / name, folder / name)
    shutil.copy(ROOT / "tests/eval/calibration/labels_v1.0.jsonl", labels / "labels_v1.0.jsonl")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release")
    saves = git_saves(folder)
    assert saves is not None

    def who() -> str | None:
        expert = saves.expert()
        return None if expert is None else expert.name

    queue = CalibrationQueue(
        reports=judged_report.parent,
        folder=labels,
        kb=load_kb(KB_ROOT),
        root=ROOT,
        who=who,
        released=saves.released,
    )
    state = EditorState(
        folder=folder, kb=queue.kb, lang="zh", git=saves, routes=calibration_routes(queue)
    )
    state.warm()
    server = make_server(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    shots = ROOT / "docs" / "img" if os.environ.get("RAG_DOCS_SCREENSHOTS") else tmp_path / "img"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        yield {
            "url": f"http://127.0.0.1:{server.server_address[1]}/",
            "repo": repo,
            "folder": folder,
            "labels": labels,
            "report": judged_report,
            "shots": shots,
        }
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def shot(pg: Any, loop: dict[str, Any], name: str) -> None:
    path = loop["shots"] / f"expert-{name}.png"
    pg.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 10_000


def test_fix_add_save_commit_and_feedback_in_chinese(
    page: Any,  # noqa: F811
    loop: dict[str, Any],
) -> None:
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 1400, "height": 900})
    repo, folder = loop["repo"], loop["folder"]
    page.goto(loop["url"])
    expect(page.locator("#save")).to_have_text("保存")
    page.click('button.suite[data-suite="smoke"]')
    expect(page.locator("#status")).to_contain_text("已发布")
    page.click('li.case[data-id="smoke-004"]')
    expect(page.locator('[data-field="must_include"] label')).to_contain_text("必含词")
    expect(page.locator('[data-field="must_include"] .help')).to_contain_text("每行一个，或用逗号")

    # fixing: what the old help showed (JSON), then a full-width comma — the same two items
    page.fill("#f-must_include", '["5 天", "10 天"]')
    expect(page.locator("#p-must_include .chip")).to_have_text(["5 天", "10 天"])
    page.fill("#f-must_include", "5 天，10 天、15 天，20 年")
    expect(page.locator("#p-must_include .chip")).to_have_text(["5 天", "10 天", "15 天", "20 年"])
    expect(page.locator("#p-must_include")).to_contain_text("将保存为 4 项")

    # a bad id: a Chinese message naming the field by its Chinese name
    page.fill("#f-id", "smoke 004!")
    expect(page.locator("#i-id")).to_contain_text("不能用作 id")
    expect(page.locator("#issues li.error")).to_contain_text("编号（id）")
    page.click("#save")
    expect(page.locator("#status")).to_contain_text("未保存：1 个错误")
    page.fill("#f-id", "smoke-004")
    expect(page.locator("#i-id")).to_have_text("")
    page.locator('[data-field="must_include"]').scroll_into_view_if_needed()
    shot(page, loop, "fix")

    # adding a case with the chunk picker
    page.click("#new-case")
    page.fill("#f-question", "陪产假有几天？")
    page.fill("#f-golden_answer", "男员工在配偶生育时享有陪产假 15 天。")
    page.fill("#f-annotator", "zhangsan")
    page.fill("#f-tags", "hr，leave")
    page.fill("#f-must_include", "陪产假，15 天")
    page.fill("#chunk-q", "陪产假")
    page.click("#chunk-search")
    page.click('button.pick-golden[data-chunk="sample:hr/other_leave.md#2"]')
    expect(page.locator("#issues li.error")).to_have_count(0)
    page.locator("#chunk-results").scroll_into_view_if_needed()
    shot(page, loop, "add")

    # no note: refused in Chinese, nothing written
    page.click("#save")
    expect(page.locator("#status")).to_contain_text("请在说明栏写明改了什么")
    assert not (folder / "smoke_v1.1.jsonl").exists()
    page.fill("#note", "smoke-004 必含词补全；新增陪产假用例")
    page.click("#save")
    # asked once who the expert is
    expect(page.locator("#expert-dialog")).to_be_visible()
    page.fill("#expert-name", "张三")
    page.fill("#expert-email", "bad")
    page.click("#expert-save")
    expect(page.locator("#expert-msg")).to_contain_text("邮箱")
    page.fill("#expert-email", "zhangsan@example.com")
    shot(page, loop, "who")
    page.click("#expert-save")
    expect(page.locator("#status")).to_contain_text("已保存到 smoke_v1.1.jsonl")
    expect(page.locator("#status")).to_contain_text("version 已自动加 1：smoke-004")
    expect(page.locator("#commit-info")).to_contain_text("张三 <zhangsan@example.com>")

    # the file, the commit, the CHANGELOG
    new = [json.loads(x) for x in (folder / "smoke_v1.1.jsonl").read_text("utf-8").splitlines()]
    four = next(c for c in new if c["id"] == "smoke-004")
    assert four["must_include"] == ["5 天", "10 天", "15 天", "20 年"] and four["version"] == 2
    added = new[-1]
    assert added["golden_chunk_ids"] == ["sample:hr/other_leave.md#2"]
    assert added["must_include"] == ["陪产假", "15 天"] and added["tags"] == ["hr", "leave"]
    assert git(repo, "log", "-1", "--format=%an <%ae>") == "张三 <zhangsan@example.com>"
    assert git(repo, "branch", "--show-current") == "datasets/smoke-v1.1-zhangsan"
    assert "smoke-004 必含词补全" in (folder / "CHANGELOG.md").read_text("utf-8")

    # instant feedback on the changed cases: the four facts
    fb = page.locator('#feedback .fb[data-case="smoke-004"]')
    expect(fb.locator(".fb-rank")).to_contain_text("排名第 1")
    expect(fb.locator(".fb-word.good")).to_have_count(4)
    expect(fb.locator(".fb-mode")).to_contain_text("符合预期")
    expect(fb.locator(".fb-acl")).to_contain_text("employee")
    # the time is shown (never asserted here: scripts/bench_feedback.py measures it)
    assert re.search(r"[\d.]+ 毫秒", fb.locator(".help").first.inner_text())
    page.locator("#feedback").scroll_into_view_if_needed()
    shot(page, loop, "feedback")

    # a pull request: without gh, the exact commands
    if shutil.which("gh") is None:
        page.click("#pr-btn")
        expect(page.locator("#pr-result code.pr-command").first).to_have_text(
            "git push -u origin datasets/smoke-v1.1-zhangsan"
        )
        shot(page, loop, "pull-request")


def test_an_expert_labels_20_judged_cases_and_kappa_matches_scikit_learn(
    page: Any,  # noqa: F811
    loop: dict[str, Any],
) -> None:
    from playwright.sync_api import expect
    from sklearn.metrics import cohen_kappa_score

    git(loop["repo"], "config", "--local", "rag.expertName", "李四")
    git(loop["repo"], "config", "--local", "rag.expertEmail", "lisi@example.com")
    page.set_viewport_size({"width": 1200, "height": 900})
    page.goto(loop["url"] + "calibrate")
    expect(page.locator("#cal-start")).to_have_text("开始")
    page.select_option("#cal-report", loop["report"].name)
    page.select_option("#cal-metric", "relevance")
    page.fill("#cal-n", "20")
    page.click("#cal-start")
    expect(page.locator("#cal-progress")).to_contain_text("第 1 / 20 条")
    shot(page, loop, "calibrate-queue")
    assert "评审" not in page.locator("#cal-item").inner_text().split("你的分数")[0]  # blind
    plan = [5, 5, 4, 3, 2, 5, 4, 4, 3, 5, 1, 2, 5, 5, 3, 4, 5, 2, 3, 5]
    for n, score in enumerate(plan):
        if n == 3:
            page.fill("#cal-note", "答非所问，只说了流程")
        page.click(f'button.score[data-score="{score}"]')
        if n + 1 < len(plan):
            expect(page.locator("#cal-progress")).to_contain_text(f"第 {n + 2} / 20 条")
    expect(page.locator("#cal-status")).to_contain_text("队列完成：已标注 20 条")

    # the labels: a new version of the labels file, the expert as annotator
    path = labels_file(loop["labels"])
    assert path is not None and path.name == "labels_v1.1.jsonl"
    assert (loop["labels"] / "labels_v1.0.jsonl").read_bytes() == (
        ROOT / "tests/eval/calibration/labels_v1.0.jsonl"
    ).read_bytes()  # the released file is never appended to
    rows = [json.loads(x) for x in path.read_text("utf-8").splitlines()][61:]
    assert len(rows) == 20 and {r["annotator"] for r in rows} == {"李四"}
    assert [r["human_score"] for r in rows] == plan
    assert rows[3]["note"] == "答非所问，只说了流程"
    assert {r["judge_prompt"] for r in rows} == {"judge/relevance_v1"}

    # the agreement page: κ against the judge scores the rows were taken from
    page.click("#cal-compare")
    row = page.locator('#cal-prompts tr[data-prompt="judge/relevance_v1"]')
    expect(row).to_have_count(1)
    human = [r["human_score"] for r in rows]
    judge = [int(r["judge_score"] + 0.5) for r in rows]
    expected = cohen_kappa_score(human, judge, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert row.locator(".kappa").inner_text() == f"{expected:.3f}"
    disagreements = sum(h != j for h, j in zip(human, judge, strict=True))
    expect(page.locator("#cal-disagreements .dis")).to_have_count(disagreements)
    page.locator("#cal-compare").scroll_into_view_if_needed()
    shot(page, loop, "calibrate-compare")

    # rag judge calibrate on the same labels (the offline judge scores them again)
    only = loop["labels"] / "expert_rows.jsonl"
    only.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"PYTHONPATH": str(ROOT), "RAG_CACHE_DIR": str(loop["repo"] / ".cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "app", "judge", "calibrate", "--labels", str(only),
         "--judge", "offline:reference-judge", "--samples", "1", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    scored = result["rows"]
    assert [r["human"] for r in scored] == human
    judged = [r["judge_score"] for r in scored]
    sk = cohen_kappa_score(human, judged, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert result["overall"]["kappa"] == pytest.approx(sk, abs=1e-12)
    exact = sum(h == j for h, j in zip(human, judged, strict=True)) / 20
    assert result["overall"]["exact"] == pytest.approx(exact)
    within = sum(abs(h - j) <= 1 for h, j in zip(human, judged, strict=True)) / 20
    assert result["overall"]["within_one"] == pytest.approx(within)
    assert result["per_prompt"]["relevance"][0] == "judge/relevance_v1"
