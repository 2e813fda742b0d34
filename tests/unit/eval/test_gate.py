"""`rag eval run --gate red-lines`: only red-line metrics (and partial runs) set exit 1."""

from __future__ import annotations

from typing import Any

import pytest

from app.cli.eval import gate_exit_code


def report(acl: str, correctness: str, partial: bool = False) -> dict[str, Any]:
    return {
        "partial": partial,
        "metrics": {
            "acl_leak": {"red_line": True},
            "correctness": {"red_line": False},
        },
        "verdicts": {
            "acl_leak": {"verdict": acl},
            "correctness": {"verdict": correctness},
        },
    }


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
def test_red_lines_gate(acl: str, correctness: str, partial: bool, expected: int) -> None:
    assert gate_exit_code(report(acl, correctness, partial)) == expected
