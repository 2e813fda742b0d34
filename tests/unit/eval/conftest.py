"""A private repository root for harness tests: a 5-case ``mini`` suite, the real sample
KB and report schema (symlinked), and its own cache — so these tests never depend on, or
write into, the shipped suites, reports/ or .cache/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.paths import PACKAGE_DIR

REPO = PACKAGE_DIR.parent
HERE = Path(__file__).parent


@pytest.fixture
def eval_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "tests/eval/datasets").mkdir(parents=True)
    (root / "tests/eval/kb").mkdir(parents=True)
    (root / "reports").mkdir()
    shutil.copy(HERE / "mini_v1.0.jsonl", root / "tests/eval/datasets/mini_v1.0.jsonl")
    (root / "tests/eval/kb/sample").symlink_to(REPO / "tests/eval/kb/sample")
    (root / "reports/report.schema.json").symlink_to(REPO / "reports/report.schema.json")
    monkeypatch.setenv("RAG_ROOT", str(root))
    monkeypatch.setenv("RAG_CACHE_DIR", str(root / ".cache"))
    monkeypatch.setenv("RAG_LOG_DIR", str(root / "logs"))
    return root
