"""The mistakes a Chinese-speaking expert makes in a spreadsheet or a JSONL line end in the
intended value or a clear Chinese message before anything is written (editor: see
tests/e2e/test_e2e_expert_loop.py; the same parser serves both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _datasets_support import DATASETS, kb, line, valid_case
from openpyxl import load_workbook
from test_datasets_sheets import row, write_rows

from app.cli import main
from app.eval.datasets.case import load_suite
from app.eval.datasets.check import check_text
from app.eval.datasets.items import parse_items
from app.eval.datasets.sheets import COLUMNS, export_rows, read_sheet, rows_to_jsonl, write_sheet


@pytest.mark.parametrize(
    "typed",
    [
        '["24 小时", "8000"]',  # what the old help showed (JSON)
        "24 小时\n8000",  # one per line
        "24 小时，8000",  # full-width comma
        "24 小时, 8000",
        "24 小时、8000",
        "24 小时；8000",
        "［“24 小时”，“8000”］",  # JSON typed with a Chinese input method
        '"24 小时", "8000"',
    ],
)
def test_every_way_of_typing_a_list_means_the_same_list(typed: str) -> None:
    assert parse_items(typed) == ["24 小时", "8000"]


def test_a_comma_inside_a_number_is_not_a_separator() -> None:
    assert parse_items("1,999 元，3,000 元") == ["1,999 元", "3,000 元"]
    assert parse_items('["a, b"]') == ["a, b"]  # JSON keeps an item whole
    assert parse_items("") == [] and parse_items(" \n ") == []


def test_a_csv_cell_with_a_full_width_comma_imports_as_two_items(tmp_path: Path) -> None:
    sheet = write_rows(
        tmp_path / "leave.csv",
        [
            row(
                question="年假有多少天？",
                golden_answer="满 1 年不满 10 年的年假 5 天。",
                golden_chunk_ids="sample:hr/annual_leave.md#1",
                must_include="5 天，10 年",
                acl="employee",
            )
        ],
    )
    cases, letters, issues = read_sheet(sheet, lang="zh")
    assert issues == []
    assert cases[0]["must_include"] == ["5 天", "10 年"]
    text, checked = rows_to_jsonl(cases, suite="t", file="leave.csv", kb=kb(), letters=letters)
    assert json.loads(text)["must_include"] == ["5 天", "10 年"]
    assert checked == []  # both words are in the golden passage: nothing to warn about


def test_sheet_messages_are_chinese_and_hints_match_the_cell(tmp_path: Path) -> None:
    sheet = write_rows(
        tmp_path / "bad.csv",
        [
            row(expected_refusal="否"),  # a Chinese "no" is read as false
            row(id="t-002", expected_refusal="也许"),
            row(id="t-003", acl=""),
            row(id="t-004", question=""),
        ],
    )
    cases, letters, issues = read_sheet(sheet, lang="zh")
    assert cases[0]["expected_refusal"] is False
    _, checked = rows_to_jsonl(
        cases, suite="t", file="bad.csv", kb=kb(), letters=letters, lang="zh"
    )
    shown = [i.format("bad.csv") for i in [*issues, *checked]]
    assert any(
        s.startswith(
            "bad.csv：第 3 行，K 列（应拒答（expected_refusal））：'也许' 不是 true 或 false"
        )
        for s in shown
    ), shown
    acl = next(s for s in shown if "第 4 行" in s and "acl" in s)
    assert "用分号分隔" in acl and '["employee"]' not in acl  # a cell hint, not JSON
    question = next(s for s in shown if "第 5 行" in s)
    assert "必填" in question and "删掉" not in question  # a required field cannot be left out
    assert not any(c.isascii() and c.isalpha() for c in _words(shown))


def _words(shown: list[str]) -> str:
    """The prose of the messages without file names, field keys, values and examples."""
    import re

    text = " ".join(shown)
    for pattern in (
        r"bad\.csv",
        r"[（(][a-z_\[\]0-9.]+[)）]",
        r"'[^']*'",
        r'"[^"]*"',
        r"\b(true|false|user|assistant|sample:\S+|employee|hr|public|finance|exec|K|J|A|B)\b",
        r"[a-z_]+(\[\d+\])?",
    ):
        text = re.sub(pattern, "", text)
    return text


def test_xlsx_help_sheet_shows_the_cell_formats(tmp_path: Path) -> None:
    target = tmp_path / "s.xlsx"
    write_sheet(export_rows(load_suite("hard", root=DATASETS)), target, "xlsx", lang="zh")
    wb = load_workbook(target, read_only=True)
    help_rows = {r[0]: r[1] for r in wb["help"].iter_rows(values_only=True)}
    wb.close()
    assert (
        "user:" in help_rows["多轮历史（history）"] and "[{" not in help_rows["多轮历史（history）"]
    )
    assert "分号" in help_rows["权限组（acl）"] and '["' not in help_rows["权限组（acl）"]


def test_jsonl_items_typed_as_one_are_named(tmp_path: Path) -> None:
    bad = valid_case(must_include=['["24 小时", "8000"]', "身份证，体检报告"])
    result = check_text(line(bad) + "\n", suite="t", kb=kb(), lang="zh")
    joined = [i for i in result.issues if i.code == "list-item-joined"]
    assert [i.field for i in joined] == ["must_include[0]", "must_include[1]"]
    assert "看起来是把几项写成了一项" in joined[0].message


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import subprocess

    root = tmp_path / "repo"
    folder = root / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    (folder / "smoke_v1.0.jsonl").write_bytes((DATASETS / "smoke_v1.0.jsonl").read_bytes())
    (folder / "CHANGELOG.md").write_text("# changelog\n", encoding="utf-8")
    (root / "tests" / "eval" / "kb").mkdir(parents=True)
    (root / "tests" / "eval" / "kb" / "sample").symlink_to(DATASETS.parent / "kb" / "sample")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    for key, value in {**env, "GIT_COMMITTER_EMAIL": "t@x"}.items():
        monkeypatch.setenv(key, value)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "release"], cwd=root, check=True)
    monkeypatch.setenv("RAG_ROOT", str(root))
    monkeypatch.chdir(tmp_path)
    return folder


def test_import_on_top_of_an_unsaved_draft_updates_the_draft(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = export_rows(load_suite("smoke", root=repo))
    rows[1][COLUMNS.index("question")] = "入职要带什么材料？"
    write_sheet(rows, tmp_path / "a.csv", "csv")
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "a.csv", "--suite", "smoke", "--note", "first", "--lang", "zh"])
    assert exc.value.code == 0
    assert "已写入" in capsys.readouterr().out
    rows[2][COLUMNS.index("question")] = "入职第一天几点到？"
    write_sheet(rows, tmp_path / "b.csv", "csv")
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "b.csv", "--suite", "smoke", "--note", "second"])
    assert exc.value.code == 0
    assert not (repo / "smoke_v1.2.jsonl").exists()  # the draft v1.1 was updated
    suite = load_suite("smoke", root=repo)
    assert suite.version == "1.1"
    assert [c.question for c in suite.cases[:2]] == ["入职要带什么材料？", "入职第一天几点到？"]
    log = (repo / "CHANGELOG.md").read_text(encoding="utf-8")
    assert log.count("## smoke v1.1") == 1 and "- first" in log and "- second" in log


def test_import_errors_are_counted_in_chinese(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = export_rows(load_suite("smoke", root=repo))
    rows[1][COLUMNS.index("acl")] = "staff"
    write_sheet(rows, tmp_path / "bad.csv", "csv")
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "bad.csv", "--suite", "smoke", "--lang", "zh"])
    assert exc.value.code == 1
    out = capsys.readouterr().out
    assert "1 个错误：没有写入任何文件" in out and "error(s)" not in out
    assert not (repo / "smoke_v1.1.jsonl").exists()


def test_import_raises_the_version_of_a_changed_case_so_the_check_passes(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = export_rows(load_suite("smoke", root=repo))
    answer = COLUMNS.index("golden_answer")
    rows[1][answer] = rows[1][answer].replace("7 天内补交", "5 天内补交")
    write_sheet(rows, tmp_path / "a.csv", "csv")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "datasets",
                "import",
                "a.csv",
                "--suite",
                "smoke",
                "--note",
                "补交期限",
                "--lang",
                "zh",
            ]
        )
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "version 已自动加 1：smoke-001" in out
    suite = load_suite("smoke", root=repo)
    assert suite.version == "1.1"
    first, second = suite.cases[:2]
    assert first.golden_answer.endswith("5 天内补交。") and first.version == 2
    assert second.version == 1  # unchanged cases keep theirs
    # importing the same sheet again on top of the draft raises nothing twice
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "a.csv", "--suite", "smoke", "--note", "again"])
    assert exc.value.code == 0
    assert load_suite("smoke", root=repo).cases[0].version == 2
    capsys.readouterr()
    # and the rule the pull request runs is satisfied
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check", "--changed-since", "HEAD"])
    out = capsys.readouterr().out
    assert "version" not in out and exc.value.code == 0, out


def test_export_speaks_the_experts_language(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "export", "smoke", "--csv", "--out", "s.csv", "--lang", "zh"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == "已写入 s.csv（smoke v1.0 的 43 个用例）"
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "export", "smoke", "--csv", "--out", "s.csv", "--lang", "zh"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "s.csv：文件已存在——请用 --out 换一个文件名" in err and "Traceback" not in err
