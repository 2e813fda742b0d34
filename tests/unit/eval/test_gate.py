"""`rag eval run --gate red-lines`: only red-line metrics (and partial runs) set exit 1."""

from __future__ import annotations

from typing import Literal

import pytest

from app.cli.eval import gate_exit_code
from app.eval.report.records import Report
from tests.support import reports as r

V = Literal["pass", "fail", "no_data"]


def report(acl: V, correctness: V, partial: bool = False) -> Report:
    return r.report(
        [r.case("kb-001", {"acl_leak": 0.0, "correctness": 4.0})],
        {
            "acl_leak": r.info("lower", red_line=True),
            "correctness": r.info(kind="judge", unit="score 1-5", scale="continuous"),
        },
        verdicts={
            "acl_leak": r.verdict("acl_leak", acl),
            "correctness": r.verdict("c", correctness),
        },
        partial_reason="--max-cost reached" if partial else None,
        gate="red-lines",
    )


@pytest.mark.parametrize(
    ("acl", "correctness", "partial", "expected"),
    [
        ("pass", "pass", False, 0),
        ("pass", "fail", False, 0),  # a quality threshold miss does not gate
        ("fail", "pass", False, 1),  # a red line does
        ("pass", "pass", True, 1),  # a partial run never passes
        ("no_data", "fail", False, 0),
    ],
)
def test_red_lines_gate(acl: V, correctness: V, partial: bool, expected: int) -> None:
    assert gate_exit_code(report(acl, correctness, partial)) == expected
