"""One file with one instance of every error kind: all reported in one run, right lines, exit 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _datasets_support import DATASETS, KB_ROOT, SCHEMA, check, line, valid_case

from app.cli import main
from app.errors import DatasetError
from app.eval.datasets.check import check_paths

BAD_JSON = '{"id": "t-002", "question": "年假几天？", "acl": ["employee"],}'
BAD_COLUMN = BAD_JSON.index(",}") + 2  # the "}" after the trailing comma, 1-based


def write_broken(tmp_path: Path) -> tuple[Path, Path]:
    other = tmp_path / "other_v1.0.jsonl"
    other.write_text(line(valid_case("o-001")) + "\n", encoding="utf-8")
    no_answer = valid_case("t-003")
    del no_answer["golden_answer"]
    typo = valid_case("t-005")
    typo["qestion"] = typo.pop("question")
    rows = [
        "\ufeff" + line(valid_case("t-001")),  # 1 BOM (warning) + CRLF (warning)
        BAD_JSON,  # 2 invalid JSON
        line(no_answer),  # 3 missing field
        line(valid_case("t-004", acl="employee")),  # 4 mistyped field
        line(typo),  # 5 unknown field (+ the required one it replaced)
        line(valid_case("t-001")),  # 6 duplicate id in this file
        line(valid_case("o-001")),  # 7 duplicate id across files
        line(valid_case("t-008", golden_chunk_ids=["sample:hr/onbording.md#1"])),  # 8 unknown chunk
        line(
            valid_case("t-009", golden_chunk_ids=["sample:hr/onboarding.md#99"])
        ),  # 9 out of range
        line(
            valid_case("t-010", golden_chunk_ids=["sample:hr/salary_bands.md#1"], must_include=[])
        ),  # 10 acl
        line(valid_case("t-011", expected_refusal=True)),  # 11 refusal with golden chunks
        "",  # 12 blank line (warning)
        line(valid_case("t-013", difficulty="medum")),  # 13 bad enum value
        "[1, 2]",  # 14 not an object
        line(valid_case("t-015"))[:-1] + ', "id": "t-015b"}',  # 15 duplicate key
    ]
    broken = tmp_path / "broken cases.jsonl"  # bad file name
    broken.write_bytes(("\r\n".join(rows) + "\r\n\r\n").encode("utf-8"))  # trailing blank line
    return other, broken


EXPECTED = {
    # (line, code, field)
    (None, "file-name", ""),
    (1, "bom", ""),
    (1, "crlf", ""),
    (2, "json", ""),
    (3, "missing-field", "golden_answer"),
    (4, "wrong-type", "acl"),
    (5, "unknown-field", "qestion"),
    (5, "missing-field", "question"),
    (6, "duplicate-id", "id"),
    (7, "duplicate-id", "id"),
    (8, "unknown-chunk", "golden_chunk_ids[0]"),
    (9, "unknown-chunk", "golden_chunk_ids[0]"),
    (10, "acl", "golden_chunk_ids[0]"),
    (11, "expected_refusal", "expected_refusal"),
    (12, "blank-line", ""),
    (13, "bad-value", "difficulty"),
    (14, "json", ""),
    (15, "duplicate-field", "id"),
}


def test_every_error_kind_reported_in_one_run(tmp_path: Path) -> None:
    other, broken = write_broken(tmp_path)
    result = check(other, broken)
    got = {
        (i.line, i.code, i.field) for i in result.issues if i.file.endswith("broken cases.jsonl")
    }
    expected = {
        (ln, "refusal-with-chunks" if c == "expected_refusal" else c, f) for ln, c, f in EXPECTED
    }
    assert expected <= got, sorted(expected - got, key=str)
    assert result.exit_code == 1
    by_code = {i.code: i for i in result.issues}
    messages = {(i.line, i.code): i.format() for i in result.issues}
    assert f"column {BAD_COLUMN}" in messages[(2, "json")]
    assert "did you mean 'question'" in messages[(5, "unknown-field")]
    assert "other_v1.0.jsonl:1" in messages[(7, "duplicate-id")]
    assert "sample:hr/onboarding.md#1" in messages[(8, "unknown-chunk")]
    assert "#0 to #4" in messages[(9, "unknown-chunk")]
    assert "did you mean 'medium'" in messages[(13, "bad-value")]
    assert by_code["blank-line"].severity == "warning"
    # every message is `file:line: field: what — how`
    for issue in result.issues:
        assert " — " in issue.format()


def test_every_error_kind_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other, broken = write_broken(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check", str(other), str(broken)])
    assert exc.value.code == 1
    out = capsys.readouterr().out
    for ln in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15):
        assert f"broken cases.jsonl:{ln}: " in out
    assert "error(s)" in out.splitlines()[-1]


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other, broken = write_broken(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check", "--json", str(other), str(broken)])
    assert exc.value.code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["exit_code"] == 1
    assert {"file", "line", "field", "message", "fix", "severity", "code"} <= set(data["issues"][0])


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = check(tmp_path / "nope_v1.0.jsonl")
    assert result.exit_code == 2
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check", str(tmp_path / "nope_v1.0.jsonl")])
    assert exc.value.code == 2
    assert "not found" in capsys.readouterr().err


def test_not_utf8_exits_2_and_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "latin_v1.0.jsonl"
    second = (
        line(valid_case("a-2", golden_answer="CAFE")).encode("utf-8").replace(b"CAFE", b"caf\xe9")
    )
    bad.write_bytes(line(valid_case("a-1")).encode("utf-8") + b"\n" + second + b"\n")
    result = check(bad)
    assert result.exit_code == 2
    assert [(i.line, i.code) for i in result.issues] == [(2, "unreadable")]


def test_folder_argument_and_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty_v1.0.jsonl").write_text("", encoding="utf-8")
    result = check(tmp_path)
    assert result.exit_code == 0
    assert [i.code for i in result.issues] == ["empty-file"]


def test_warnings_for_keywords_and_rewrites(tmp_path: Path) -> None:
    f = tmp_path / "warn_v1.0.jsonl"
    rows = [
        valid_case("w-1", must_include=["不存在的词"]),
        valid_case("w-2", history=[{"role": "user", "content": "你好"}]),
        valid_case("w-3", golden_rewrite="新员工入职需要带什么？"),
        valid_case("w-4", golden_chunk_ids=[]),
    ]
    f.write_text("".join(line(r) + "\n" for r in rows), encoding="utf-8")
    result = check(f)
    assert result.exit_code == 0
    assert [(i.line, i.code) for i in result.issues] == [
        (1, "keyword-not-in-chunk"),
        (2, "no-rewrite"),
        (3, "rewrite-without-history"),
        (4, "no-chunks"),
    ]


# ---------------------------------------------------------------- --changed-since
def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    folder = root / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    shutil.copy(SCHEMA, folder / "case.schema.json")
    (folder / "CHANGELOG.md").write_text("# changelog\n\n## smoke v1.0\n", encoding="utf-8")
    (folder / "smoke_v1.0.jsonl").write_text(
        line(valid_case("s-1")) + "\n" + line(valid_case("s-2")) + "\n", encoding="utf-8"
    )
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "v1.0")
    return root


def run(repo: Path, rev: str = "HEAD") -> list[tuple[str, int | None, str]]:
    folder = repo / "tests" / "eval" / "datasets"
    result = check_paths(None, folder=folder, kb_root=KB_ROOT, changed_since=rev)
    return [(Path(i.file).name, i.line, i.code) for i in result.issues]


def test_released_file_edited_in_place_without_changelog(repo: Path) -> None:
    path = repo / "tests" / "eval" / "datasets" / "smoke_v1.0.jsonl"
    path.write_text(
        line(valid_case("s-1")) + "\n" + line(valid_case("s-2", question="入职要带啥？")) + "\n",
        encoding="utf-8",
    )
    issues = run(repo)
    assert ("CHANGELOG.md", None, "changelog") in issues
    assert ("smoke_v1.0.jsonl", 2, "released-edited") in issues


def test_new_version_with_changelog_is_clean(repo: Path) -> None:
    folder = repo / "tests" / "eval" / "datasets"
    (folder / "smoke_v1.1.jsonl").write_text(line(valid_case("s-3")) + "\n", encoding="utf-8")
    with (folder / "CHANGELOG.md").open("a", encoding="utf-8") as fh:
        fh.write("\n## smoke v1.1\n- added s-3\n")
    assert run(repo) == []


def test_new_version_without_changelog(repo: Path) -> None:
    folder = repo / "tests" / "eval" / "datasets"
    (folder / "smoke_v1.1.jsonl").write_text(line(valid_case("s-3")) + "\n", encoding="utf-8")
    assert run(repo) == [("CHANGELOG.md", None, "changelog")]


def test_unknown_revision_is_unreadable_input(repo: Path) -> None:
    with pytest.raises(DatasetError, match="unknown git revision"):
        run(repo, "no-such-branch")


def test_changed_since_through_the_cli(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(KB_ROOT, repo / "tests" / "eval" / "kb" / "sample")
    path = repo / "tests" / "eval" / "datasets" / "smoke_v1.0.jsonl"
    path.write_text(
        path.read_text(encoding="utf-8") + line(valid_case("s-9")) + "\n", encoding="utf-8"
    )
    monkeypatch.setenv("RAG_ROOT", str(repo))
    monkeypatch.chdir(repo)
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check", "--changed-since", "HEAD"])
    assert exc.value.code == 1
    out = capsys.readouterr().out
    assert "tests/eval/datasets/smoke_v1.0.jsonl:3: released file edited in place" in out
    assert "CHANGELOG.md did not" in out
    assert os.environ["RAG_ROOT"] == str(repo)


def test_default_paths_are_the_shipped_datasets() -> None:
    result = check_paths(None, folder=DATASETS)
    assert len(result.files) >= 4
