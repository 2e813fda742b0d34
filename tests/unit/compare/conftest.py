"""Synthetic reports in the docs/interfaces.md §6 shape, built case by case in the tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from app.llm.spec import parse_model

JUDGE_PROMPTS = {
    "judge/faithfulness": {"version": "judge/faithfulness_v1", "hash": "sha256:aaa111"},
    "judge/correctness": {"version": "judge/correctness_v1", "hash": "sha256:bbb222"},
}
METRIC_SPECS: dict[str, dict[str, Any]] = {
    "faithfulness": {
        "direction": "higher",
        "kind": "judge",
        "unit": "score 1-5",
        "scale": "continuous",
        "red_line": False,
    },
    "correctness": {
        "direction": "higher",
        "kind": "judge",
        "unit": "score 1-5",
        "scale": "continuous",
        "red_line": False,
    },
    "refusal_rate": {
        "direction": "none",
        "kind": "deterministic",
        "unit": "rate",
        "scale": "binary",
        "red_line": False,
    },
    "citation_accuracy": {
        "direction": "higher",
        "kind": "deterministic",
        "unit": "rate",
        "scale": "binary",
        "red_line": False,
    },
    "tokens": {
        "direction": "lower",
        "kind": "deterministic",
        "unit": "tokens",
        "scale": "continuous",
        "red_line": False,
        "group": "cost",
    },
    "rewrite_accuracy": {
        "direction": "higher",
        "kind": "deterministic",
        "unit": "rate",
        "scale": "binary",
        "red_line": False,
    },
    "acl_leak": {
        "direction": "lower",
        "kind": "deterministic",
        "unit": "rate",
        "scale": "binary",
        "red_line": True,
    },
}

ReportFactory = Callable[..., dict[str, Any]]


def build_report(
    values: Mapping[str, Sequence[float | None]],
    *,
    ids: Sequence[str] | None = None,
    tags: Sequence[Sequence[str]] | None = None,
    judge: str = "anthropic:claude-opus-4-7",
    judge_prompts: Mapping[str, Mapping[str, str]] | None = None,
    candidate: str = "anthropic:claude-sonnet-4-6",
    prompt_version: str = "system/kb_qa_v1",
    dataset_version: str = "1.0",
    run_id: str = "run",
    refused: Sequence[bool] | None = None,
) -> dict[str, Any]:
    n = len(next(iter(values.values())))
    ids = list(ids) if ids is not None else [f"kb-{i:03d}" for i in range(1, n + 1)]
    tags = list(tags) if tags is not None else [["hr"] if i % 2 else ["it"] for i in range(n)]
    cases = []
    for i, cid in enumerate(ids):
        metrics = {}
        for name, vals in values.items():
            v = vals[i]
            metrics[name] = {"value": v, "reason": None if v is not None else "judge error"}
        extra = {"refused": refused[i]} if refused is not None else {}
        cases.append(
            {
                **extra,
                "id": cid,
                "tags": list(tags[i]),
                "difficulty": "easy",
                "metrics": metrics,
                "answer": "",
                "trace": {},
                "errors": [],
            }
        )
    return {
        "schema_version": "1",
        "run_id": run_id,
        "created_at": "2026-11-30T19:00:00Z",
        "partial": False,
        "meta": {
            "candidate": {"provider": candidate, "offline": parse_model(candidate).offline},
            "judge": {
                "provider": judge,
                "offline": parse_model(judge).offline,
                "samples": 3,
                "prompts": dict(judge_prompts if judge_prompts is not None else JUDGE_PROMPTS),
            },
            "prompts": {
                "system/kb_qa": {"version": prompt_version, "hash": f"sha256:{prompt_version}"}
            },
            "datasets": [
                {
                    "name": "smoke",
                    "version": dataset_version,
                    "sha256": "d" * 64 if dataset_version == "1.0" else "e" * 64,
                    "path": f"tests/eval/datasets/smoke_v{dataset_version}.jsonl",
                }
            ],
        },
        "metrics": {name: METRIC_SPECS[name] for name in values},
        "cases": cases,
        "summary": {},
    }


@pytest.fixture
def make_report() -> ReportFactory:
    return build_report


@pytest.fixture
def write_report(tmp_path: Path) -> Callable[[str, dict[str, Any]], Path]:
    def write(name: str, report: dict[str, Any]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
        return path

    return write
