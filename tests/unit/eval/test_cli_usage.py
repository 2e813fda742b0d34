"""`rag eval run` usage errors: exit 2, a message, no progress bar, no traceback."""

from __future__ import annotations

import subprocess
import sys


def rag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120
    )


def test_a_new_run_needs_a_suite() -> None:
    result = rag("eval", "run")
    assert result.returncode == 2
    assert "give --suite S or --dataset FILE for a new run, or --resume RUN_ID" in result.stderr


def test_a_bad_provider_fails_before_any_progress_bar() -> None:
    result = rag("eval", "run", "--suite", "smoke", "--model", "foo:bar", "--out", "/nonexistent")
    assert result.returncode == 2
    assert "unknown provider 'foo:bar'" in result.stderr
    assert "━" not in result.stderr  # no (empty) progress bar drawn before the error
    assert "Traceback" not in result.stderr
