"""Where things live. Everything is relative to the repository root unless overridden."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path:
    """The repository root: ``$RAG_ROOT`` if set, else the parent of the ``app`` package."""
    env = os.environ.get("RAG_ROOT")
    return Path(env).resolve() if env else PACKAGE_DIR.parent


def prompts_dir() -> Path:
    return PACKAGE_DIR / "generation" / "prompts"


def datasets_dir() -> Path:
    return repo_root() / "tests" / "eval" / "datasets"


def kb_dir() -> Path:
    return repo_root() / "tests" / "eval" / "kb" / "sample"


def reports_dir() -> Path:
    return repo_root() / "reports"


def cache_dir() -> Path:
    """The response cache and run checkpoints: ``$RAG_CACHE_DIR`` or ``.cache/``."""
    env = os.environ.get("RAG_CACHE_DIR")
    return Path(env).resolve() if env else repo_root() / ".cache"


def logs_dir() -> Path:
    env = os.environ.get("RAG_LOG_DIR")
    return Path(env).resolve() if env else repo_root() / "logs"
