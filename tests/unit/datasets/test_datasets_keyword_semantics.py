"""`rag datasets check` finds a must_include keyword in a golden chunk exactly as the
metrics do (app.text.contains): numbers whole, thousands separators and width ignored.

The chunk sample:company/about.md#1 says "公司现有员工约 1200 人，在深圳（总部）…".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _datasets_support import check, line, valid_case

from app.eval.scoring.base import contains

ABOUT = "sample:company/about.md#1"


def _warned(tmp_path: Path, keyword: str) -> bool:
    f = tmp_path / "kw_v1.0.jsonl"
    case = valid_case(
        "kw-1",
        question="公司有多少员工？",
        golden_answer="约 1200 人。",
        golden_chunk_ids=[ABOUT],
        must_include=[keyword],
    )
    f.write_text(line(case) + "\n", encoding="utf-8")
    return "keyword-not-in-chunk" in [i.code for i in check(f).issues]


@pytest.mark.parametrize(
    ("keyword", "found"),
    [
        ("1200", True),
        ("200", False),  # a raw substring test found it inside 1200; the metric does not
        ("120", False),
        ("1,200", True),  # a raw substring test missed it; the metric finds the number
        ("１２００", True),  # full-width digits (NFKC)
        ("深圳(总部)", True),  # full-width parentheses in the chunk (NFKC)
        ("成都设有", True),
        ("广州", False),
    ],
)
def test_check_agrees_with_the_metric(tmp_path: Path, keyword: str, found: bool) -> None:
    chunk = "公司现有员工约 1200 人，在深圳（总部）、北京、上海和成都设有办公室。"
    assert contains(chunk, keyword) is found  # the expectation is the metric's semantics
    assert _warned(tmp_path, keyword) is (not found)
