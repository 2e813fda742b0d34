"""Messages experts can act on, in their language (issue 11): --lang zh|en, RAG_LANG, the
locale; full-width punctuation, smart quotes and a stray BOM named precisely; a lone
surrogate refused by the check exactly as the loader refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _datasets_support import check, line, valid_case

from app.cli import main
from app.errors import DatasetError
from app.eval.datasets.case import load_dataset_file
from app.eval.datasets.check import check_paths
from app.eval.datasets.messages import resolve_lang


def comma_line() -> tuple[str, int]:
    """A case whose first field ends with a full-width comma; (text, 1-based column of it)."""
    text = line(valid_case("m-003")).replace('"m-003", ', '"m-003"，', 1)
    return text, text.index("，") + 1


def test_full_width_comma_is_named_in_chinese(tmp_path: Path) -> None:
    bad, col = comma_line()
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(line(valid_case("m-001")) + "\n" + line(valid_case("m-002")) + "\n" + bad + "\n")
    [issue] = check_paths([f], kb_root=None, lang="zh").errors
    assert issue.line == 3 and issue.code == "json"
    assert issue.message == f"第 3 行第 {col} 列：使用了中文逗号 `，`，JSON 需要英文逗号 `,`"
    assert "缺少" not in issue.format()  # not reported as a "missing comma"


def test_full_width_comma_in_english(tmp_path: Path) -> None:
    bad, col = comma_line()
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(bad + "\n", encoding="utf-8")
    [issue] = check_paths([f], lang="en").errors
    assert (
        issue.message == f"line 1, column {col}: a full-width comma `，`; JSON needs the ASCII `,`"
    )
    assert "missing comma" not in issue.format()


@pytest.mark.parametrize(
    ("old", "new", "zh_name", "ascii"),
    [
        ('"question": ', '"question"： ', "中文冒号", ":"),
        ('"question"', "“question”", "中文引号（弯引号）", '"'),
        ('"acl": [', '"acl": 【', "中文方括号", "["),
    ],
)
def test_look_alike_punctuation(
    tmp_path: Path, old: str, new: str, zh_name: str, ascii: str
) -> None:
    text = line(valid_case("m-1")).replace(old, new, 1)
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(text + "\n", encoding="utf-8")
    [issue] = check_paths([f], lang="zh").errors
    col = next(i for i, ch in enumerate(text) if ch in new and not ch.isascii()) + 1
    assert issue.message.startswith(f"第 1 行第 {col} 列：使用了{zh_name} ")
    assert issue.message.endswith(f"`{ascii}`")


def test_a_bom_inside_the_file_is_named(tmp_path: Path) -> None:
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(line(valid_case("m-1")) + "\n\ufeff" + line(valid_case("m-2")) + "\n")
    [issue] = check_paths([f], lang="zh").errors
    assert issue.line == 2
    assert issue.message == "第 2 行第 1 列：文件中间有看不见的字节顺序标记（BOM，U+FEFF）"


LONE = line(valid_case("m-1", golden_answer="身份证ZZ")).replace("ZZ", "\\ud800")


def test_lone_surrogate_is_refused_by_the_check_as_by_the_loader(tmp_path: Path) -> None:
    """The defect: `\\ud800` passed `rag datasets check` and crashed `rag eval run`."""
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(LONE + "\n", encoding="utf-8")
    assert json.loads(LONE)["golden_answer"] == "身份证\ud800"  # valid JSON, broken text
    with pytest.raises(DatasetError, match="golden_answer"):
        load_dataset_file(f)
    [issue] = check(f).errors
    assert (issue.line, issue.field, issue.code) == (1, "golden_answer", "bad-value")
    assert "surrogate" in issue.message
    issue.format().encode("utf-8")  # the message itself is printable


def test_lone_surrogate_anywhere_and_in_a_key(tmp_path: Path) -> None:
    case = valid_case(
        "m-1", history=[{"role": "user", "content": "x\ud800"}], must_include=["\udfff"]
    )
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(json.dumps(case) + "\n", encoding="utf-8")  # ASCII escapes: a valid file
    fields = {i.field for i in check(f).errors}
    assert {"history[0].content", "must_include[0]"} <= fields
    keyed = valid_case("m-2")
    keyed["\ud800"] = 1
    g = tmp_path / "k_v1.0.jsonl"
    g.write_text(json.dumps(keyed) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError):
        load_dataset_file(g)
    [issue] = check(g).errors
    assert (issue.line, issue.field) == (1, "\ud800") and "surrogate" in issue.message
    zh = check_paths([f], lang="zh").errors
    assert {i.field for i in zh} >= {"history[0].content", "must_include[0]"}
    assert all("孤立代理项" in i.message for i in zh)


def test_lone_surrogate_stops_eval_run_before_any_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(LONE + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["eval", "run", "--dataset", str(f), "--quiet", "--out", str(tmp_path / "r")])
    assert exc.value.code == 2
    assert "surrogate" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_every_message_of_the_broken_file_exists_in_both_languages(tmp_path: Path) -> None:
    from test_datasets_every_error import write_broken

    other, broken = write_broken(tmp_path)
    en = check_paths([other, broken], lang="en")
    zh = check_paths([other, broken], lang="zh")
    assert [(i.line, i.code, i.field) for i in en.issues] == [
        (i.line, i.code, i.field) for i in zh.issues
    ]
    for a, b in zip(en.issues, zh.issues, strict=True):
        assert a.message != b.message, a.format()
        assert any("\u4e00" <= ch <= "\u9fff" for ch in b.message + b.fix), b.format()
    assert zh.summary().startswith("检查了 2 个文件")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RAG_LANG": "zh"}, "zh"),
        ({"RAG_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({}, "en"),
    ],
)
def test_language_resolution(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name in ("RAG_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert resolve_lang() == expected
    assert resolve_lang("en") == "en" and resolve_lang("zh") == "zh"


def test_cli_lang_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad, _ = comma_line()
    f = tmp_path / "m_v1.0.jsonl"
    f.write_text(bad + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check", "--lang", "zh", str(f)])
    assert exc.value.code == 1
    out = capsys.readouterr().out
    assert "使用了中文逗号" in out and "检查了 1 个文件" in out
