"""Shared fixtures for the prompt-registry tests: a private copy of the shipped library and a
CLI runner that goes through the real ``rag`` entry point (exit-code mapping included)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.generation.registry import default_root

LIBRARY = default_root()


@pytest.fixture(autouse=True)
def _no_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_PROMPT_PIN", raising=False)


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    """A copy of app/generation/prompts that a test may break."""
    root = tmp_path / "prompts"
    shutil.copytree(LIBRARY, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def rag(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run ``rag <args>`` in-process through app.cli.main and return exit code + output."""
    from app.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        captured = capsys.readouterr()
        code = exc.value.code
        return Result(int(code) if code is not None else 0, captured.out, captured.err)

    return run
