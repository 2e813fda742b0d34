"""`rag datasets check` on hostile files: exit 2 (unreadable) or 1 (check failed), one message."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.limits import LIMITS

ROOT = Path(__file__).resolve().parents[3]
LINE = (ROOT / "tests/eval/datasets/smoke_v1.0.jsonl").read_text(encoding="utf-8").splitlines()[0]


def test_fifo_named_like_a_dataset_exits_2(rag: Callable[..., object], tmp_path: Path) -> None:
    fifo = tmp_path / "a_v1.0.jsonl"
    os.mkfifo(fifo)
    r = rag("datasets", "check", str(fifo))
    assert r.code == 2 and "FIFO" in r.err and "a_v1.0.jsonl" in r.err


def test_symlink_loop_and_dev_zero_exit_2(rag: Callable[..., object], tmp_path: Path) -> None:
    loop = tmp_path / "a_v1.0.jsonl"
    loop.symlink_to(loop.name)
    zero = tmp_path / "z_v1.0.jsonl"
    zero.symlink_to("/dev/zero")
    r = rag("datasets", "check", str(loop), str(zero))
    assert r.code == 2 and "symlink loop" in r.err and "a device" in r.err
    r = rag("datasets", "check", str(tmp_path))  # the folder holding them
    assert r.code == 2 and "symlink loop" in r.err


def test_empty_folder_is_exit_2_not_zero_files_ok(
    rag: Callable[..., object], tmp_path: Path
) -> None:
    r = rag("datasets", "check", str(tmp_path))
    assert r.code == 2 and "holds no *.jsonl file" in r.err


def _case(**fields: object) -> str:
    return json.dumps({**json.loads(LINE), **fields})  # ASCII: a surrogate stays an escape


@pytest.mark.parametrize(
    ("line", "field", "needle"),
    [
        (_case(question="年" * 8001), "question", "over the limit of 8,000"),
        (_case(history=[{"role": "user", "content": "x"}] * 101), "history", "101 messages"),
        (_case(golden_answer="\ud800"), "golden_answer", "lone surrogate"),
        ('{"\\udc00": 1}', "\udc00", "lone surrogate"),
        (LINE[:-1] + ', "x": "' + "a" * 300_000 + '"}', "", "over the limit of 256,000"),
    ],
)
def test_limits_are_check_errors_with_line_and_field(
    rag: Callable[..., object], tmp_path: Path, line: str, field: str, needle: str
) -> None:
    f = tmp_path / "hostile_v1.0.jsonl"
    f.write_text(line + "\n", encoding="utf-8", errors="surrogatepass")
    r = rag("datasets", "check", str(f), "--json")
    assert r.code == 1
    issues = json.loads(r.out.encode("utf-8", "surrogatepass"))["issues"]
    hits = [i for i in issues if needle in i["message"]]
    assert hits, issues
    assert hits[0]["line"] == 1
    if field:
        assert hits[0]["field"].encode("unicode_escape") == field.encode("unicode_escape")


def test_the_question_limit_is_the_documented_one() -> None:
    assert LIMITS["question_chars"].value == 8000
