"""app.eval.datasets.case: loading suites the way the harness does."""

from __future__ import annotations

from pathlib import Path

import pytest
from _datasets_support import line, valid_case

from app.errors import DatasetError
from app.eval.datasets.case import load_dataset_file, load_suite, parse_file_name


def test_parse_file_name() -> None:
    assert parse_file_name("smoke_v1.0.jsonl") == ("smoke", 1, 0)
    assert parse_file_name("my_suite_v12.3.jsonl") == ("my_suite", 12, 3)
    assert parse_file_name("smoke.jsonl") is None
    assert parse_file_name("Smoke_v1.0.jsonl") is None


def test_bom_crlf_and_blank_lines_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "x_v1.0.jsonl"
    path.write_bytes(
        ("\ufeff" + line(valid_case("a")) + "\r\n\r\n" + line(valid_case("b")) + "\r\n").encode()
    )
    suite = load_dataset_file(path)
    assert [c.id for c in suite.cases] == ["a", "b"]
    assert (suite.name, suite.version) == ("x", "1.0")


def test_bad_lines_raise_with_every_line(tmp_path: Path) -> None:
    path = tmp_path / "x_v1.0.jsonl"
    path.write_text(
        "{oops\n" + line(valid_case("a")) + "\n" + line(valid_case("b", acl=[])) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DatasetError) as exc:
        load_dataset_file(path)
    assert "x_v1.0.jsonl:1:" in str(exc.value) and "x_v1.0.jsonl:3: acl" in str(exc.value)


def test_newest_version_and_exact_version(tmp_path: Path) -> None:
    (tmp_path / "s_v1.2.jsonl").write_text(line(valid_case("old")) + "\n", encoding="utf-8")
    (tmp_path / "s_v1.10.jsonl").write_text(line(valid_case("new")) + "\n", encoding="utf-8")
    assert load_suite("s", root=tmp_path).cases[0].id == "new"  # 1.10 > 1.2
    assert load_suite("s", "1.2", root=tmp_path).cases[0].id == "old"
    with pytest.raises(DatasetError, match=r"no version 9\.9"):
        load_suite("s", "9.9", root=tmp_path)
    with pytest.raises(DatasetError, match="known suites: s"):
        load_suite("nope", root=tmp_path)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_dataset_file(tmp_path / "missing_v1.0.jsonl")
    bad = tmp_path / "b_v1.0.jsonl"
    bad.write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(DatasetError, match="not UTF-8"):
        load_dataset_file(bad)
