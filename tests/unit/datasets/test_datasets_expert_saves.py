"""Editor saves reviewed like code (a commit by the expert on a branch for the change, a pull
request or the commands for it), the version of a changed case raised by the save itself, and
the instant feedback of the offline pipeline on a case."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _datasets_support import DATASETS, kb, line, valid_case
from test_datasets_editor_api import OWN, call

from app.eval.datasets.changes import check_changed_since
from app.eval.datasets.commits import git_saves
from app.eval.datasets.editor import EditorState
from app.eval.datasets.editor_http import make_server
from app.eval.datasets.issues import CheckResult


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "lead", "GIT_AUTHOR_EMAIL": "lead@x.org"}
    env |= {"GIT_COMMITTER_NAME": "lead", "GIT_COMMITTER_EMAIL": "lead@x.org"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    root = tmp_path / "repo"
    folder = root / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    (folder / "smoke_v1.0.jsonl").write_text(
        line(valid_case("s-1")) + "\n" + line(valid_case("s-2")) + "\n", encoding="utf-8"
    )
    shutil.copy(DATASETS / "CHANGELOG.md", folder / "CHANGELOG.md")
    (root / "other.txt").write_text("staged, not the expert's\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release smoke v1.0")
    (root / "other.txt").write_text("changed and staged meanwhile\n", encoding="utf-8")
    git(root, "add", "other.txt")
    state = EditorState(folder=folder, kb=kb(), lang="zh", git=git_saves(folder))
    server = make_server(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], root, folder
    server.shutdown()
    server.server_close()


def test_a_save_is_a_commit_by_the_expert_on_a_branch_for_the_change(
    repo: tuple[int, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, root, folder = repo
    loaded = call(port, "GET", "/api/suite?name=smoke")[1]
    edited = [{**loaded["cases"][0], "golden_answer": "身份证、学历证书。"}, loaded["cases"][1]]
    body = {"suite": "smoke", "cases": edited, "sha256": loaded["sha256"], "note": "s-1 shorter"}
    # who the expert is is asked once; nothing is written before
    status, out = call(port, "POST", "/api/save", body, **OWN)
    assert (status, out.get("need_expert")) == (422, True)
    assert not (folder / "smoke_v1.1.jsonl").exists()
    status, bad = call(port, "POST", "/api/expert", {"name": "张三", "email": "nope"}, **OWN)
    assert status == 422 and "邮箱" in bad["error"]
    status, _ = call(
        port, "POST", "/api/expert", {"name": "张三", "email": "zhangsan@x.org"}, **OWN
    )
    assert status == 200
    assert git(root, "config", "--local", "rag.expertEmail") == "zhangsan@x.org"

    status, out = call(port, "POST", "/api/save", body, **OWN)
    assert status == 200 and out["file"] == "smoke_v1.1.jsonl", out
    assert out["raised"] == ["s-1"] and out["cases"][0]["version"] == 2  # raised by the save
    branch = "datasets/smoke-v1.1-zhangsan"
    assert out["commit"]["branch"] == branch and git(root, "branch", "--show-current") == branch
    author = git(root, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s")
    assert (
        author == "张三 <zhangsan@x.org>|张三 <zhangsan@x.org>|datasets: smoke v1.1 — s-1 shorter"
    )
    files = git(root, "show", "--name-only", "--format=", "HEAD").splitlines()
    assert sorted(files) == [
        "tests/eval/datasets/CHANGELOG.md",
        "tests/eval/datasets/smoke_v1.1.jsonl",
    ]
    assert git(root, "diff", "--cached", "--name-only") == "other.txt"  # left staged, not taken

    # the check the pull request runs passes: version raised, CHANGELOG entry with the note
    result = CheckResult()
    check_changed_since("main", folder, result)
    assert result.issues == []

    # a second save commits onto the same draft (not released: main does not have it)
    again = {**body, "cases": out["cases"], "sha256": out["sha256"], "note": "s-2 tags"}
    again["cases"][1] = {**again["cases"][1], "tags": "hr，first-day"}  # typed in a text box
    status, out2 = call(port, "POST", "/api/save", again, **OWN)
    assert status == 200 and out2["file"] == "smoke_v1.1.jsonl" and out2["raised"] == ["s-2"]
    assert out2["cases"][1]["tags"] == ["hr", "first-day"]
    assert git(root, "log", "--format=%s", "main..HEAD").splitlines() == [
        "datasets: smoke v1.1 — s-2 tags",
        "datasets: smoke v1.1 — s-1 shorter",
    ]
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert log.count("## smoke v1.1") == 1 and "- s-1 shorter\n- s-2 tags" in log

    # no gh here: the exact commands
    only_git = tmp_path / "only-git"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(only_git))
    status, pr = call(port, "POST", "/api/pull-request", {"create": True, "title": "t"}, **OWN)
    assert status == 200 and pr["url"] is None and pr["gh"] is False
    assert pr["commands"][0] == f"git push -u origin {branch}"
    assert pr["commands"][1].startswith(f"gh pr create --base main --head {branch} --title 't'")


def test_one_click_pull_request_with_gh(
    repo: tuple[int, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, root, _ = repo
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(root, "remote", "add", "origin", str(remote))
    call(port, "POST", "/api/expert", {"name": "李四", "email": "lisi@x.org"}, **OWN)
    loaded = call(port, "GET", "/api/suite?name=smoke")[1]
    cases = [*loaded["cases"], valid_case("s-3")]
    body = {"suite": "smoke", "cases": cases, "sha256": loaded["sha256"], "note": "s-3 added"}
    assert call(port, "POST", "/api/save", body, **OWN)[0] == 200
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "gh-args"
    gh = bin_dir / "gh"
    gh.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\necho https://github.example/o/r/pull/7\n',
        encoding="utf-8",
    )
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    payload = {"create": True, "title": "datasets: smoke", "body": "s-3"}
    status, pr = call(port, "POST", "/api/pull-request", payload, **OWN)
    assert status == 200 and pr["url"] == "https://github.example/o/r/pull/7", pr
    args = record.read_text(encoding="utf-8").splitlines()
    assert args[:6] == ["pr", "create", "--base", "main", "--head", "datasets/smoke-v1.1-lisi"]
    assert git(remote, "branch", "--list", "datasets/*") == "datasets/smoke-v1.1-lisi"


def test_feedback_names_rank_words_mode_and_acl(repo: tuple[int, Path, Path]) -> None:
    port, _, _ = repo
    good = valid_case("s-1", must_include="身份证、年终奖")  # the second word is not there
    refuse = valid_case("s-2", expected_refusal=True, golden_chunk_ids=[])
    hidden = valid_case("s-3", acl=["public"], golden_chunk_ids=["sample:hr/salary_bands.md#1"])
    body = {"suite": "smoke", "cases": [good, refuse, hidden], "ids": []}
    status, out = call(port, "POST", "/api/feedback", body, **OWN)
    assert status == 200
    one, two, three = out["cases"]
    [golden] = one["golden"]
    assert golden["id"] == "sample:hr/onboarding.md#1" and golden["rank"] == 1
    assert golden["in_context"] is True and golden["acl"] == ["public"]
    assert [(w["word"], w["found"]) for w in one["must_include"]] == [
        ("身份证", True),
        ("年终奖", False),
    ]
    assert one["mode"] in {"strict", "assisted"} and one["mode_ok"] is True
    # the onboarding question answers well: a refusal expected here does not match
    assert two["expected_refusal"] is True and two["mode_ok"] is False
    # a golden chunk the case's user may not read has no rank
    [secret] = three["golden"]
    assert secret["readable"] is False and secret["rank"] is None and "public" not in secret["acl"]
    assert all(isinstance(c["ms"], float) for c in out["cases"])
    assert json.dumps(out, ensure_ascii=False)  # plain JSON for the page
