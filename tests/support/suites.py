"""Every case of every shipped suite (``tests/eval/datasets/*_v*.jsonl``), as the files hold them.

For the tests that compare a computation on every suite question (retrieval's exact-float
checks) and for the chaos run's repeated suite. Read from :func:`app.paths.datasets_dir` at
call time (``RAG_ROOT`` is honoured); each call returns fresh dicts, so a caller may change
its copy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.paths import datasets_dir


def suite_cases(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every case of every ``*_v*.jsonl`` file in ``folder`` (the shipped suites by default),
    file by file in name order, line by line; blank lines skipped."""
    cases: list[dict[str, Any]] = []
    for path in sorted((folder or datasets_dir()).glob("*_v*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                cases.append(json.loads(line))
    return cases


def suite_questions(folder: Path | None = None) -> list[str]:
    """The ``question`` of every case of :func:`suite_cases`, in the same order."""
    return [case["question"] for case in suite_cases(folder)]
