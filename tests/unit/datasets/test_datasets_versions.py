"""Versions work as documented (issue 11): a newer version supersedes the older within a
suite, ids are unique inside a file and across suites, `rag datasets new-version`, and the
--changed-since rules for a new version's CHANGELOG entry."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pytest
from _datasets_support import DATASETS, KB_ROOT, check, line, valid_case

from app.cli import main
from app.errors import DatasetError
from app.eval.datasets.case import load_suite
from app.eval.datasets.check import check_paths
from app.eval.datasets.versions import CHANGELOG_STUB, new_version


def write(path: Path, *cases: dict[str, object]) -> Path:
    path.write_text("".join(line(c) + "\n" for c in cases), encoding="utf-8")
    return path


def codes(result: object) -> list[tuple[str, int | None, str]]:
    return [(Path(i.file).name, i.line, i.code) for i in result.issues]  # type: ignore[attr-defined]


def test_the_readme_copy_is_not_43_duplicate_errors(tmp_path: Path) -> None:
    """The defect: copying smoke_v1.0 to smoke_v1.1 gave one duplicate-id error per case."""
    shutil.copy(DATASETS / "smoke_v1.0.jsonl", tmp_path / "smoke_v1.0.jsonl")
    shutil.copy(DATASETS / "smoke_v1.0.jsonl", tmp_path / "smoke_v1.1.jsonl")
    result = check_paths(None, folder=tmp_path, kb_root=KB_ROOT)
    assert [i.format() for i in result.issues] == []
    assert result.exit_code == 0


def test_same_id_in_a_newer_version_updates_the_case(tmp_path: Path) -> None:
    write(tmp_path / "smoke_v1.0.jsonl", valid_case("s-1"), valid_case("s-2"))
    write(
        tmp_path / "smoke_v1.1.jsonl",
        valid_case("s-1", question="入职要带啥？", version=2),
        valid_case("s-2"),
        valid_case("s-3"),
    )
    assert check(tmp_path / "smoke_v1.0.jsonl", tmp_path / "smoke_v1.1.jsonl").exit_code == 0
    suite = load_suite("smoke", root=tmp_path)
    assert suite.version == "1.1"
    assert [c.id for c in suite.cases] == ["s-1", "s-2", "s-3"]
    assert suite.by_id("s-1") is not None and suite.by_id("s-1").question == "入职要带啥？"  # type: ignore[union-attr]
    assert load_suite("smoke", "1.0", root=tmp_path).by_id("s-3") is None


def test_ids_stay_unique_inside_a_file_and_across_suites(tmp_path: Path) -> None:
    write(tmp_path / "smoke_v1.0.jsonl", valid_case("s-1"))
    write(tmp_path / "smoke_v1.1.jsonl", valid_case("s-1"), valid_case("s-1"))
    write(tmp_path / "full_v1.0.jsonl", valid_case("s-1"))
    result = check(*sorted(tmp_path.glob("*.jsonl")))
    assert ("smoke_v1.1.jsonl", 2, "duplicate-id") in codes(result)
    cross = [i for i in result.issues if Path(i.file).name == "smoke_v1.0.jsonl"]
    assert [(i.line, i.code) for i in cross] == [(1, "duplicate-id")]  # full came first
    assert "suite full" in cross[0].message
    assert result.exit_code == 1


def test_a_suite_file_is_checked_against_the_other_suites(tmp_path: Path) -> None:
    write(tmp_path / "full_v1.0.jsonl", valid_case("x-1"))
    write(tmp_path / "smoke_v1.0.jsonl", valid_case("x-1"))
    result = check_paths([tmp_path / "smoke_v1.0.jsonl"], folder=tmp_path, kb_root=KB_ROOT)
    assert codes(result) == [("smoke_v1.0.jsonl", 1, "duplicate-id")]
    # a team's own file outside the suites folder is not held to the suites' ids
    outside = tmp_path / "own"
    outside.mkdir()
    write(outside / "mine_v1.0.jsonl", valid_case("x-1"))
    assert check_paths([outside / "mine_v1.0.jsonl"], folder=tmp_path, kb_root=KB_ROOT).issues == []


def test_a_bare_file_name_is_found_in_the_datasets_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The README's `rag datasets check smoke_v1.1.jsonl` answered "file not found"."""
    monkeypatch.chdir(tmp_path)
    result = check_paths([Path("smoke_v1.0.jsonl")], folder=DATASETS, kb_root=KB_ROOT)
    assert result.exit_code == 0 and sum(result.files.values()) == 43


def test_new_version_copies_bumps_and_writes_a_stub(tmp_path: Path) -> None:
    write(tmp_path / "smoke_v1.0.jsonl", valid_case("s-1"))
    (tmp_path / "CHANGELOG.md").write_text("# changelog\n", encoding="utf-8")
    day = dt.date(2026, 12, 1)
    minor = new_version("smoke", root=tmp_path, who="zhangsan", today=day)
    assert minor.name == "smoke_v1.1.jsonl"
    assert minor.read_bytes() == (tmp_path / "smoke_v1.0.jsonl").read_bytes()
    major = new_version("smoke", major=True, root=tmp_path, who="lisi", today=day, note="dropped")
    assert major.name == "smoke_v2.0.jsonl"
    log = (tmp_path / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## smoke v1.1 — 2026-12-01 — zhangsan" in log
    assert "## smoke v2.0 — 2026-12-01 — lisi" in log and "- dropped" in log
    assert log.count(CHANGELOG_STUB) == 1
    with pytest.raises(DatasetError, match="not found"):
        new_version("nope", root=tmp_path)


def test_new_version_never_overwrites(tmp_path: Path) -> None:
    write(tmp_path / "smoke_v1.0.jsonl", valid_case("s-1"))
    new_version("smoke", root=tmp_path, who="t")
    before = (tmp_path / "smoke_v1.1.jsonl").read_bytes()
    newest = new_version("smoke", root=tmp_path, who="t")  # the newest is 1.1 now
    assert newest.name == "smoke_v1.2.jsonl"
    assert (tmp_path / "smoke_v1.1.jsonl").read_bytes() == before


def test_new_version_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    write(folder / "smoke_v1.0.jsonl", valid_case("s-1"))
    monkeypatch.setenv("RAG_ROOT", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "new-version", "smoke", "--note", "added s-2"])
    assert exc.value.code == 0
    assert (folder / "smoke_v1.1.jsonl").exists()
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "new-version", "nope"])
    assert exc.value.code == 2


# ---------------------------------------------------------------- --changed-since
def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c",
         "commit.gpgsign=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo" / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    (folder / "CHANGELOG.md").write_text("# changelog\n\n## smoke v1.0\n", encoding="utf-8")
    write(folder / "smoke_v1.0.jsonl", valid_case("s-1"))
    git(folder.parents[2], "init", "-q")
    git(folder.parents[2], "add", ".")
    git(folder.parents[2], "commit", "-q", "-m", "v1.0")
    return folder


def changed(folder: Path) -> list[tuple[str, int | None, str]]:
    return codes(check_paths(None, folder=folder, kb_root=KB_ROOT, changed_since="HEAD"))


def test_changed_since_refuses_the_stub_until_it_is_filled(repo: Path) -> None:
    path = new_version("smoke", root=repo, who="t")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line(valid_case("s-2")) + "\n")
    assert changed(repo) == [("CHANGELOG.md", None, "changelog")]
    log = repo / "CHANGELOG.md"
    log.write_text(log.read_text(encoding="utf-8").replace(CHANGELOG_STUB, "added s-2"), "utf-8")
    assert changed(repo) == []


def test_changed_since_needs_an_entry_naming_the_new_version(repo: Path) -> None:
    write(repo / "smoke_v1.1.jsonl", valid_case("s-1"), valid_case("s-2"))
    with (repo / "CHANGELOG.md").open("a", encoding="utf-8") as fh:
        fh.write("\n## smoke v1.10\n- another file\n")  # names a different version
    assert changed(repo) == [("CHANGELOG.md", None, "changelog")]


def test_changed_since_a_case_whose_content_changed_raises_its_version(repo: Path) -> None:
    """A golden_answer changed in the next version without raising the case's version is
    an error naming the line (it used to pass); raising it to 2 clears it."""
    edited = valid_case("s-1", golden_answer="身份证、学历证书。")
    write(repo / "smoke_v1.1.jsonl", edited, valid_case("s-2"))
    with (repo / "CHANGELOG.md").open("a", encoding="utf-8") as fh:
        fh.write("\n## smoke v1.1 — 2026-12-02 — t\n\n- s-1: shorter answer; s-2 added\n")
    result = check_paths(None, folder=repo, kb_root=KB_ROOT, changed_since="HEAD", lang="zh")
    [issue] = [i for i in result.issues if i.code == "version-not-raised"]
    assert (Path(issue.file).name, issue.line, issue.field) == ("smoke_v1.1.jsonl", 1, "version")
    assert "version 仍是 1" in issue.message and "改为 2" in issue.fix
    write(repo / "smoke_v1.1.jsonl", {**edited, "version": 2}, valid_case("s-2"))
    assert changed(repo) == []


def test_a_released_file_may_gain_anchors_in_place_but_not_change_one(repo: Path) -> None:
    """`rag datasets anchor` on a released file (the migration) is not an edit: the anchor
    resolves to the id it was written for. Changing an existing anchor, or a label beside
    it, is one (the label would then point elsewhere without a new version)."""
    from app.eval.datasets.anchors import anchor_suite
    from app.retrieval.kb import load_kb

    path = repo / "smoke_v1.0.jsonl"
    git(repo.parents[2], "commit", "-q", "--allow-empty", "-m", "released")
    assert anchor_suite(path, load_kb(KB_ROOT)) == ["s-1"]
    assert '"anchors"' in path.read_text(encoding="utf-8")
    # neither "released-edited" nor "version-not-raised": only the CHANGELOG entry every
    # changed dataset file needs
    assert changed(repo) == [("CHANGELOG.md", None, "changelog")]
    git(repo.parents[2], "add", ".")
    git(repo.parents[2], "commit", "-q", "-m", "anchors")
    assert changed(repo) == []
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"chars": ', '"chars": 1', 1), encoding="utf-8")
    assert ("smoke_v1.0.jsonl", 1, "released-edited") in changed(repo)
