"""The `rag` entry point's contract: exit codes 0/1/2 and no traceback on bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_command_group() -> None:
    result = run("--help")
    assert result.returncode == 0
    for name in ("prompts", "datasets", "eval", "ask", "judge", "report"):
        assert f"  {name} " in result.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("bogus",), "No such command 'bogus'"),
        (("prompts", "show", "system/does_not_exist"), "unknown prompt 'system/does_not_exist'"),
        (
            (
                "prompts",
                "render",
                "system/kb_qa",
                "--model",
                "gpt-3.5-turbo",
                "--var",
                "question=q",
            ),
            "APPLICABLE_MODELS",
        ),
    ],
)
def test_bad_input_exits_2_without_traceback(args: tuple[str, ...], needle: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
