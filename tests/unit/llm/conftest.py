"""Fixtures for the LLM tests (shared ones live in tests/support/fixtures.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[3])
if _ROOT not in sys.path:  # `tests.support` when pytest is run as .venv/bin/pytest
    sys.path.insert(0, _ROOT)

from tests.support.fixtures import (  # noqa: E402, F401
    engine_factory,
    fake_llm_server,
    isolated_cache,
    planted_keys,
)
