"""The editor's JSON API without a browser: 127.0.0.1 only, its own page only, released
files never written, concurrent changes refused, the same checker as `rag datasets check`."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _datasets_support import DATASETS, KB_ROOT, kb, line, valid_case

from app.eval.datasets.editor import EditorState
from app.eval.datasets.editor_http import make_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, Path, EditorState]]:
    folder = tmp_path / "datasets"
    folder.mkdir()
    (folder / "smoke_v1.0.jsonl").write_text(
        line(valid_case("s-1")) + "\n" + line(valid_case("s-2")) + "\n", encoding="utf-8"
    )
    shutil.copy(DATASETS / "CHANGELOG.md", folder / "CHANGELOG.md")
    state = EditorState(folder=folder, kb=kb(), lang="zh", who="tester")
    server = make_server(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], folder, state
    server.shutdown()
    server.server_close()


def call(port: int, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", **headers}
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, json.loads(raw) if raw.startswith(b"{") else raw


OWN = {"X-Rag-Editor": "1"}


def test_binds_127_0_0_1_and_refuses_foreign_requests(
    served: tuple[int, Path, EditorState],
) -> None:
    port, _, _ = served
    status, page = call(port, "GET", "/")
    assert status == 200 and b"rag datasets edit" in page
    assert call(port, "GET", "/api/suites", Host="evil.example")[0] == 403  # DNS rebinding
    body = {"suite": "smoke", "cases": []}
    assert call(port, "POST", "/api/validate", body)[0] == 403  # no X-Rag-Editor: not our page
    assert call(port, "POST", "/api/validate", "not json", **OWN)[0] == 400
    assert call(port, "GET", "/api/suite?name=nope")[0] == 404


def test_validate_uses_the_checker_in_the_run_language(
    served: tuple[int, Path, EditorState],
) -> None:
    port, _, _ = served
    bad = valid_case("s-1", acl={"group": "employee"})
    status, out = call(port, "POST", "/api/validate", {"suite": "smoke", "cases": [bad]}, **OWN)
    assert status == 200 and out["ok"] is False
    [issue] = [i for i in out["issues"] if i["severity"] == "error"]
    assert (issue["line"], issue["field"], issue["code"]) == (1, "acl", "wrong-type")
    assert "方括号" in issue["message"] and issue["label"] == "权限组（acl）"
    # a list field may come as the text of its box: parsed, and the items sent back
    typed = valid_case("s-1", must_include="身份证，体检报告")
    status, out = call(port, "POST", "/api/validate", {"suite": "smoke", "cases": [typed]}, **OWN)
    assert status == 200 and out["ok"] is True
    assert out["parsed"] == {"0": {"must_include": ["身份证", "体检报告"]}}
    fields = call(port, "GET", "/api/fields")[1]["fields"]
    assert {f["name"] for f in fields if f["required"]} >= {"id", "question", "acl"}


def test_chunks_are_filtered_by_acl_and_text(served: tuple[int, Path, EditorState]) -> None:
    port, _, _ = served
    public = call(port, "GET", "/api/chunks?q=salary_bands&acl=public")[1]["chunks"]
    hr = call(port, "GET", "/api/chunks?q=salary_bands&acl=hr")[1]["chunks"]
    assert public == [] and hr and all("hr" in c["acl"] for c in hr)


def test_save_writes_the_next_version_then_the_draft(
    served: tuple[int, Path, EditorState],
) -> None:
    port, folder, _ = served
    loaded = call(port, "GET", "/api/suite?name=smoke")[1]
    cases = loaded["cases"] + [valid_case("s-3")]
    body = {"suite": "smoke", "cases": cases, "sha256": loaded["sha256"], "note": "added s-3"}
    status, out = call(port, "POST", "/api/save", body, **OWN)
    assert (status, out["file"]) == (200, "smoke_v1.1.jsonl")
    old = (folder / "smoke_v1.0.jsonl").read_text(encoding="utf-8").splitlines()
    new = (folder / "smoke_v1.1.jsonl").read_text(encoding="utf-8").splitlines()
    assert new[:2] == old and json.loads(new[2])["id"] == "s-3"
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "— tester\n\nminor: copied from `smoke_v1.0.jsonl`" in log and "- added s-3" in log
    # the next save goes to the draft this server created, not to another version
    body = {"suite": "smoke", "cases": cases[:2], "sha256": out["sha256"], "note": ""}
    status, refused = call(port, "POST", "/api/save", body, **OWN)  # a save says why
    assert status == 422 and refused["saved"] is False and "CHANGELOG" in refused["error"]
    body["note"] = "s-3 removed again: a duplicate"
    status, again = call(port, "POST", "/api/save", body, **OWN)
    assert (status, again["file"]) == (200, "smoke_v1.1.jsonl")
    assert not (folder / "smoke_v1.2.jsonl").exists()
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")  # the second note is there too
    assert log.count("## smoke v1.1") == 1 and "- added s-3\n- s-3 removed again" in log
    assert len((folder / "smoke_v1.1.jsonl").read_text(encoding="utf-8").splitlines()) == 2
    # a stale page is refused, the file is not overwritten
    before = (folder / "smoke_v1.1.jsonl").read_bytes()
    body["sha256"] = out["sha256"]  # the first save's hash: stale now
    status, stale = call(port, "POST", "/api/save", body, **OWN)
    assert status == 409 and "在磁盘上被改过" in stale["error"]  # in the run's language
    assert (folder / "smoke_v1.1.jsonl").read_bytes() == before


def test_save_refused_while_the_check_finds_an_error(
    served: tuple[int, Path, EditorState],
) -> None:
    port, folder, _ = served
    loaded = call(port, "GET", "/api/suite?name=smoke")[1]
    cases = [*loaded["cases"], valid_case("s-1")]  # duplicate id
    body = {"suite": "smoke", "cases": cases, "sha256": loaded["sha256"]}
    status, out = call(port, "POST", "/api/save", body, **OWN)
    assert status == 422 and out["saved"] is False
    assert any(i["code"] == "duplicate-id" for i in out["issues"])
    assert sorted(p.name for p in folder.glob("*.jsonl")) == ["smoke_v1.0.jsonl"]


def test_released_means_tracked_by_git(tmp_path: Path) -> None:
    folder = tmp_path / "datasets"
    folder.mkdir()
    (folder / "smoke_v1.0.jsonl").write_text(line(valid_case("s-1")) + "\n", encoding="utf-8")
    (folder / "full_v1.0.jsonl").write_text(line(valid_case("f-1")) + "\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run(["git", "add", "smoke_v1.0.jsonl"], cwd=folder, check=True)
    state = EditorState(folder=folder, kb=kb())
    by_name = {s["name"]: s for s in state.suites()}
    assert by_name["smoke"]["released"] and by_name["smoke"]["saves_to"] == "smoke_v1.1.jsonl"
    assert not by_name["full"]["released"]  # an untracked draft is edited in place
    assert by_name["full"]["saves_to"] == "full_v1.0.jsonl"
    assert KB_ROOT.is_dir()


def _candidates(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "mined_20261201T000000Z.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def candidate(cid: str, **changes: Any) -> dict[str, Any]:
    mining = {"status": "needs_review", "rules": ["no_recall"], "evidence": {"top1": 0.1}}
    return {**valid_case(cid), **mining, **changes}


def test_candidates_are_checked_as_cases_and_accepted_once(
    served: tuple[int, Path, EditorState], tmp_path: Path
) -> None:
    port, folder, state = served
    state.candidates = tmp_path / "candidates"
    path = _candidates(state.candidates, [candidate("c-1"), candidate("s-1", golden_answer="")])
    assert call(port, "GET", "/api/candidates")[1]["files"] == [
        {"name": path.name, "candidates": 2, "pending": 2}
    ]
    for bad in ("../datasets/smoke_v1.0.jsonl", "nope.jsonl", ".hidden.jsonl"):
        assert call(port, "GET", f"/api/candidate-file?name={bad}")[0] == 404
    loaded = call(port, "GET", f"/api/candidate-file?name={path.name}")[1]
    cases, sha = loaded["cases"], loaded["sha256"]

    # checked as cases of smoke: the mining fields are no error, line 2's id and answer are
    body = {"suite": "smoke", "candidates": path.name, "cases": cases}
    issues = call(port, "POST", "/api/validate", body, **OWN)[1]["issues"]
    assert {(i["line"], i["field"]) for i in issues if i["severity"] == "error"} == {
        (2, "id"),
        (2, "golden_answer"),
    }
    refused = call(port, "POST", "/api/accept", {**body, "sha256": sha, "ids": ["s-1"]}, **OWN)
    assert refused[0] == 422 and {i["line"] for i in refused[1]["issues"]} == {2}
    stale = {**body, "sha256": "0" * 64, "ids": ["c-1"]}
    assert call(port, "POST", "/api/accept", stale, **OWN)[0] == 409

    status, out = call(port, "POST", "/api/accept", {**body, "sha256": sha, "ids": ["c-1"]}, **OWN)
    # outside git smoke_v1.0 counts as released: the case goes into the next version
    released = (folder / "smoke_v1.0.jsonl").read_bytes()
    assert status == 200 and out["accepted"] and out["file"] == "smoke_v1.1.jsonl"
    assert (folder / "smoke_v1.0.jsonl").read_bytes() == released
    suite = [json.loads(x) for x in (folder / "smoke_v1.1.jsonl").read_text("utf-8").splitlines()]
    assert [c["id"] for c in suite] == ["s-1", "s-2", "c-1"]
    # the accepted case as it was, its label anchored to its passage (the last field)
    anchors = suite[-1].pop("anchors")
    assert suite[-1] == valid_case("c-1") and list(anchors) == ["sample:hr/onboarding.md#1"]
    assert anchors["sample:hr/onboarding.md#1"]["heading"] == ["新员工入职指南", "入职需携带的材料"]
    marked = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
    assert marked[0]["status"] == "accepted" and marked[0]["accepted_into"] == "smoke_v1.1.jsonl"
    assert marked[1] == candidate("s-1", golden_answer="")
    again = {**body, "cases": out["cases"], "sha256": out["sha256"], "ids": ["c-1"]}
    assert call(port, "POST", "/api/accept", again, **OWN)[0] == 422  # not twice
    assert len((folder / "smoke_v1.1.jsonl").read_text("utf-8").splitlines()) == 3
    # the accepted one is in smoke now, yet its own line raises no duplicate-id error
    issues = call(port, "POST", "/api/validate", again, **OWN)[1]["issues"]
    assert all(i["line"] == 2 for i in issues)


def test_a_review_is_saved_or_rejected_in_the_candidate_file_never_over_an_accepted_one(
    served: tuple[int, Path, EditorState], tmp_path: Path
) -> None:
    port, folder, state = served
    state.candidates = tmp_path / "candidates"
    path = _candidates(state.candidates, [candidate("c-1"), candidate("c-2"), candidate("c-3")])
    loaded = call(port, "GET", f"/api/candidate-file?name={path.name}")[1]
    body = {"suite": "smoke", "candidates": path.name, "cases": loaded["cases"]}
    accepted = call(port, "POST", "/api/accept", {**body, "sha256": loaded["sha256"], "ids": ["c-1"]}, **OWN)[1]  # fmt: skip
    before = path.read_text("utf-8").splitlines()

    # the page edits all three (the accepted one too) and rejects c-2
    edited = [{**c, "question": c["question"] + "（改）"} for c in accepted["cases"]]
    edited[2]["must_include"] = "身份证，体检报告"  # the text of a list box
    review = {**body, "cases": edited, "sha256": accepted["sha256"], "reject": ["c-2"]}
    assert call(port, "POST", "/api/review", review, **OWN)[0] == 422  # no reason given
    assert call(port, "POST", "/api/review", {**review, "sha256": "0" * 64, "note": "x"}, **OWN)[0] == 409  # fmt: skip
    short = {**review, "cases": edited[:2], "note": "x"}
    assert call(port, "POST", "/api/review", short, **OWN)[0] == 422
    assert path.read_text("utf-8").splitlines() == before  # nothing written by the refusals

    status, out = call(port, "POST", "/api/review", {**review, "note": "asked twice"}, **OWN)
    after = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
    assert status == 200 and out["saved"] and out["cases"] == after
    assert after[0] == json.loads(before[0])  # the accepted line as it was
    assert after[1]["status"] == "rejected" and after[1]["rejected_reason"] == "asked twice"
    assert after[1]["question"].endswith("（改）") and after[2]["question"].endswith("（改）")
    assert after[2].get("status") == candidate("c-3").get("status")
    assert after[2]["must_include"] == ["身份证", "体检报告"]  # parsed, as the page showed it
    assert call(port, "GET", "/api/candidates")[1]["files"] == [
        {"name": path.name, "candidates": 3, "pending": 1}
    ]
    # a rejected candidate can still be accepted later
    again = {**body, "cases": out["cases"], "sha256": out["sha256"], "ids": ["c-2"]}
    status, out = call(port, "POST", "/api/accept", again, **OWN)
    assert status == 200 and out["accepted"]
    assert [json.loads(x)["id"] for x in (folder / "smoke_v1.1.jsonl").read_text("utf-8").splitlines()][-2:] == ["c-1", "c-2"]  # fmt: skip
