"""Shared helpers for the dataset tests (imported by file name; this folder has no package)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from app.eval.datasets.check import CheckResult, check_paths
from app.retrieval.kb import KnowledgeBase, load_kb

ROOT = Path(__file__).resolve().parents[3]
DATASETS = ROOT / "tests" / "eval" / "datasets"
KB_ROOT = ROOT / "tests" / "eval" / "kb" / "sample"
SCHEMA = DATASETS / "case.schema.json"


@cache
def kb() -> KnowledgeBase:
    return load_kb(KB_ROOT, name="sample")


@cache
def schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return data


def valid_case(case_id: str = "t-001", **changes: Any) -> dict[str, Any]:
    """A case that passes every check against the sample KB."""
    case: dict[str, Any] = {
        "id": case_id,
        "question": "新员工入职需要带什么？",
        "history": [],
        "golden_answer": "身份证、学历证书、体检报告等。",
        "golden_chunk_ids": ["sample:hr/onboarding.md#1"],
        "must_include": ["身份证", "体检报告"],
        "must_not_include": [],
        "acl": ["public"],
        "expected_refusal": False,
        "tags": ["hr", "onboarding"],
        "difficulty": "easy",
        "annotator": "zhangsan",
        "annotated_at": "2026-04-01",
        "reviewed_by": "lisi",
        "version": 1,
    }
    case.update(changes)
    return case


def line(case: dict[str, Any]) -> str:
    return json.dumps(case, ensure_ascii=False)


def check(*paths: Path, folder: Path | None = None) -> CheckResult:
    return check_paths(list(paths), folder=folder or DATASETS, schema=SCHEMA, kb=kb())
