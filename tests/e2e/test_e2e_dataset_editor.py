"""`rag datasets edit` in a real headless Chromium (Debian's, driven by Playwright).

Open the page, edit a field, pick a chunk (the picker offers only chunks the case's ACL may
read), see a live validation error, fix it, save, and check the file on disk: the save
goes into the next version file plus a CHANGELOG entry, the released file is untouched,
history is edited, and a change made on disk meanwhile is detected, not overwritten.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.eval.datasets.check import check_paths
from app.eval.datasets.editor import EditorState
from app.eval.datasets.editor_http import make_server
from app.retrieval.kb import load_kb
from tests.support.browser import browser, page  # noqa: F401  (pytest fixtures)

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "tests" / "eval" / "datasets"
KB_ROOT = ROOT / "tests" / "eval" / "kb" / "sample"


def _datasets(tmp_path: Path) -> Path:
    folder = tmp_path / "datasets"
    folder.mkdir()
    for name in ("smoke_v1.0.jsonl", "hard_v1.0.jsonl", "CHANGELOG.md"):
        shutil.copy(DATASETS / name, folder / name)
    return folder


@contextmanager
def _serving(state: EditorState) -> Iterator[str]:
    server = make_server(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def editor(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    folder = _datasets(tmp_path)
    with _serving(EditorState(folder=folder, kb=load_kb(KB_ROOT), lang="en")) as url:
        yield url, folder


def test_edit_pick_validate_fix_save_in_a_real_browser(
    page: Any,  # noqa: F811
    editor: tuple[str, Path],
) -> None:
    from playwright.sync_api import expect

    url, folder = editor
    released = (folder / "smoke_v1.0.jsonl").read_bytes()
    page.goto(url)
    page.click('button.suite[data-suite="smoke"]')
    page.click('li.case[data-id="smoke-001"]')
    expect(page.locator("#f-id")).to_have_value("smoke-001")
    expect(page.locator('[data-field="annotator"] .help')).to_contain_text("user name")

    # edit a field
    page.fill("#f-question", "新员工入职第一天要带哪些材料？")

    # the chunk picker: a public case is not offered an employee-only chunk
    page.fill("#chunk-q", "设备丢失")
    page.click("#chunk-search")
    expect(page.locator("#chunk-results li.none")).to_be_visible()
    page.check("#f-acl-employee")
    page.click("#chunk-search")
    page.click('button.pick-golden[data-chunk="sample:it/devices.md#2"]')
    expect(page.locator("#f-golden_chunk_ids")).to_have_value(
        re.compile(r"sample:hr/onboarding\.md#1\nsample:it/devices\.md#2")
    )

    # a live validation error from the checker, then the save is refused
    page.fill("#f-id", "smoke 001!")
    expect(page.locator("#i-id")).to_contain_text("is not a usable id")
    expect(page.locator("#f-id")).to_have_class(re.compile("bad"))
    page.click("#save")
    expect(page.locator("#status")).to_contain_text("not saved: 1 error(s)")
    assert not (folder / "smoke_v1.1.jsonl").exists()

    # fix it, save
    page.fill("#f-id", "smoke-001")
    expect(page.locator("#i-id")).to_have_text("")
    page.fill("#note", "smoke-001: a clearer question, and the lost-device chunk")
    page.click("#save")
    expect(page.locator("#status")).to_contain_text("saved to smoke_v1.1.jsonl")

    # on disk: the next version, the released file untouched, a CHANGELOG entry
    new = folder / "smoke_v1.1.jsonl"
    old_lines = released.decode("utf-8").splitlines()
    new_lines = new.read_text(encoding="utf-8").splitlines()
    first = json.loads(new_lines[0])
    assert first["question"] == "新员工入职第一天要带哪些材料？"
    assert first["golden_chunk_ids"] == ["sample:hr/onboarding.md#1", "sample:it/devices.md#2"]
    assert first["acl"] == ["public", "employee"]
    assert list(first) == list(json.loads(old_lines[0]))  # field order kept
    assert new_lines[1:] == old_lines[1:]  # every other case byte-identical
    assert (folder / "smoke_v1.0.jsonl").read_bytes() == released
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"## smoke v1\.1 — \d{4}-\d{2}-\d{2} — ", log)
    assert "smoke-001: a clearer question, and the lost-device chunk" in log
    assert check_paths([new], folder=folder, kb_root=KB_ROOT).exit_code == 0

    # history editing on a multi-turn suite, saved into its own next version
    page.click('button.suite[data-suite="hard"]')
    page.click('li.case[data-id="hard-001"]')
    turns = page.locator("#history .turn")
    before = turns.count()
    assert before >= 1
    page.click("#add-turn")
    expect(turns).to_have_count(before + 1)
    page.locator("#history .turn-content").nth(before).fill("")
    expect(page.locator("#i-history")).to_contain_text("is empty")  # an empty turn is refused
    page.locator("#history .turn-content").nth(before).fill("好的，谢谢。")
    expect(page.locator("#i-history")).to_have_text("")
    page.click("#save")
    expect(page.locator("#status")).to_contain_text("saved to hard_v1.1.jsonl")
    hard = json.loads((folder / "hard_v1.1.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert hard["history"][-1] == {
        "role": "assistant" if before % 2 else "user",
        "content": "好的，谢谢。",
    }

    # someone changes the draft on disk meanwhile: detected, never overwritten
    page.click('button.suite[data-suite="smoke"]')
    page.click('li.case[data-id="smoke-002"]')
    page.fill("#f-question", "入职那天几点到？")
    theirs = new.read_text(encoding="utf-8").replace('"试用期多长？"', '"试用期多久？"', 1)
    new.write_text(theirs, encoding="utf-8")
    page.click("#save")
    expect(page.locator("#status")).to_have_class("conflict")
    expect(page.locator("#status")).to_contain_text("changed on disk")
    assert new.read_text(encoding="utf-8") == theirs
    assert page.locator("#f-question").input_value() == "入职那天几点到？"  # the edit is kept


@pytest.fixture
def mined(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """The editor with the candidates `rag datasets mine` wrote from the shipped sample log."""
    from app.eval.datasets.mining import mine, write_candidates
    from app.ops.logs import read_answer_log

    folder = _datasets(tmp_path)
    log = ROOT / "tests" / "data" / "answer_log" / "answers_sample.jsonl"
    mined_file = write_candidates(
        mine(read_answer_log(log), datasets_dir=folder), log, tmp_path / "candidates"
    )
    state = EditorState(folder=folder, kb=load_kb(KB_ROOT), lang="en", candidates=mined_file.parent)
    with _serving(state) as url:
        yield url, folder, mined_file


def test_review_and_accept_a_mined_candidate_in_a_real_browser(
    page: Any,  # noqa: F811
    mined: tuple[str, Path, Path],
) -> None:
    from playwright.sync_api import expect

    url, folder, mined_file = mined
    candidates = [json.loads(x) for x in mined_file.read_text(encoding="utf-8").splitlines()]
    released = (folder / "hard_v1.0.jsonl").read_bytes()
    page.goto(url)
    page.click(f'button.cand-file[data-file="{mined_file.name}"]')
    expect(page.locator("li.case")).to_have_count(len(candidates))
    slow = next(c for c in candidates if "high_latency" in c["rules"])
    page.click(f'li.case[data-id="{slow["id"]}"]')
    expect(page.locator("#f-question")).to_have_value("出差住酒店一晚最多报多少钱")
    expect(page.locator("#evidence")).to_contain_text("rules: high_latency")
    expect(page.locator("#evidence")).to_contain_text("12500")
    expect(page.locator("#accept-suite")).to_have_value("hard")  # its suggested suite

    # line-precise: every candidate lacks a golden answer, each on its own line
    expect(page.locator("#i-golden_answer")).to_contain_text("is empty")
    expect(page.locator("li.case.has-error")).to_have_count(len(candidates))
    page.click("#accept")
    expect(page.locator("#status")).to_contain_text("not accepted: 1 error(s)")
    assert (folder / "hard_v1.1.jsonl").exists() is False

    # review: the answer and its chunk (the picker offers what the case's acl may read)
    page.fill("#f-golden_answer", "一线城市住宿上限 600 元/晚。")
    page.fill("#chunk-q", "住宿标准")
    page.click("#chunk-search")
    page.locator("button.pick-golden").first.click()
    expect(page.locator("#i-golden_answer")).to_have_text("")
    expect(page.locator(f'li.case.has-error[data-id="{slow["id"]}"]')).to_have_count(0)
    expect(page.locator("li.case.has-error")).to_have_count(len(candidates) - 1)
    page.fill("#note", "mined: hotel cap question answered slowly in production")
    page.click("#accept")
    expect(page.locator("#status")).to_contain_text("into hard_v1.1.jsonl")
    expect(page.locator(f'li.case.accepted[data-id="{slow["id"]}"]')).to_have_count(1)
    expect(page.locator("#accept")).to_be_disabled()

    # on disk: the next version of hard has the case (no mining fields), v1.0 untouched,
    # a CHANGELOG entry, the candidate marked accepted, the other candidates as they were
    new_lines = (folder / "hard_v1.1.jsonl").read_text(encoding="utf-8").splitlines()
    assert new_lines[:-1] == released.decode("utf-8").splitlines()
    case = json.loads(new_lines[-1])
    assert case["id"] == slow["id"] and case["question"] == slow["question"]
    assert case["golden_answer"] == "一线城市住宿上限 600 元/晚。"
    assert case["golden_chunk_ids"] and not {"rules", "evidence", "status"} & set(case)
    assert (folder / "hard_v1.0.jsonl").read_bytes() == released
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "mined: hotel cap question answered slowly in production" in log
    assert check_paths([folder / "hard_v1.1.jsonl"], folder=folder, kb_root=KB_ROOT).exit_code == 0
    after = [json.loads(x) for x in mined_file.read_text(encoding="utf-8").splitlines()]
    [accepted] = [c for c in after if c["id"] == slow["id"]]
    assert accepted["status"] == "accepted" and accepted["accepted_into"] == "hard_v1.1.jsonl"
    assert [c for c in after if c["id"] != slow["id"]] == [
        c for c in candidates if c["id"] != slow["id"]
    ]


def test_a_candidate_s_review_is_saved_or_rejected_without_accepting_it(
    page: Any,  # noqa: F811
    mined: tuple[str, Path, Path],
) -> None:
    from playwright.sync_api import expect

    url, folder, mined_file = mined
    candidates = [json.loads(x) for x in mined_file.read_text(encoding="utf-8").splitlines()]
    suites = sorted(p.name for p in folder.glob("*.jsonl"))
    page.goto(url)
    page.click(f'button.cand-file[data-file="{mined_file.name}"]')
    first, second = candidates[0], candidates[1]
    page.click(f'li.case[data-id="{first["id"]}"]')
    page.fill("#f-golden_answer", "半成品：待业务专家确认。")
    page.click("#save-review")
    expect(page.locator("#status")).to_contain_text("review saved")
    on_disk = [json.loads(x) for x in mined_file.read_text(encoding="utf-8").splitlines()]
    assert on_disk[0]["golden_answer"] == "半成品：待业务专家确认。"
    assert on_disk[0].get("status") == first.get("status")  # still to review, not accepted
    assert on_disk[1:] == candidates[1:]

    page.click(f'li.case[data-id="{second["id"]}"]')
    page.fill("#note", "")
    page.click("#reject")
    expect(page.locator("#status")).to_contain_text("say why")
    page.fill("#note", "duplicate of an existing hard case")
    page.click("#reject")
    expect(page.locator("#status")).to_contain_text(f"rejected {second['id']}")
    expect(page.locator("#evidence")).to_contain_text("rejected: duplicate of an existing")
    expect(page.locator("#reject")).to_be_disabled()
    expect(page.locator(f'button.cand-file[data-file="{mined_file.name}"]')).to_contain_text(
        f"{len(candidates) - 1} of {len(candidates)} to review"
    )
    on_disk = [json.loads(x) for x in mined_file.read_text(encoding="utf-8").splitlines()]
    assert on_disk[1]["status"] == "rejected"
    assert on_disk[1]["rejected_reason"] == "duplicate of an existing hard case"
    assert sorted(p.name for p in folder.glob("*.jsonl")) == suites  # no suite written


def test_a_label_whose_passage_vanished_is_repointed_with_one_click(
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The editor shows each golden label's passage; a label whose passage was deleted from
    the KB is an error with a "re-point" button, and the save writes the next version."""
    from playwright.sync_api import expect

    folder = _datasets(tmp_path)
    kb_root = tmp_path / "kb" / "sample"
    shutil.copytree(KB_ROOT, kb_root)
    doc = kb_root / "hr/onboarding.md"
    text = doc.read_text(encoding="utf-8")
    gone = re.search(r"入职第一天上午 9:00.*\n", text)
    assert gone is not None
    doc.write_text(text.replace(gone.group(0), "报到安排另行通知。\n"), encoding="utf-8")
    with _serving(EditorState(folder=folder, kb=load_kb(kb_root), lang="en")) as url:
        page.goto(url)
        page.click('button.suite[data-suite="smoke"]')
        page.click('li.case[data-id="smoke-001"]')
        expect(
            page.locator('#passages li[data-chunk="sample:hr/onboarding.md#1"]')
        ).to_contain_text("入职需携带的材料 › 新员工入职当天需携带")
        page.click('li.case[data-id="smoke-002"]')
        issue = page.locator('#issues li[data-code="passage-gone"]')
        expect(issue).to_contain_text("smoke-002")
        expect(issue).to_contain_text("报到时间与地点")
        issue.locator("button.repoint").click()
        expect(page.locator('#issues li[data-code="passage-gone"]')).to_have_count(0)
        page.fill("#note", "smoke-002: the check-in passage was rewritten")
        page.click("#save")
        expect(page.locator("#status")).to_contain_text("saved to smoke_v1.1.jsonl")
        page.wait_for_load_state("networkidle")
        page.goto("about:blank")  # no request of the page outlives the server
    new = folder / "smoke_v1.1.jsonl"
    case = next(
        json.loads(line)
        for line in new.read_text(encoding="utf-8").splitlines()
        if '"smoke-002"' in line
    )
    assert case["golden_chunk_ids"] == ["sample:hr/onboarding.md#2"]
    assert case["anchors"]["sample:hr/onboarding.md#2"]["quote"].startswith("报到安排另行通知")
    assert case["version"] == 2
    assert check_paths([new], folder=folder, kb_root=kb_root).exit_code == 0
