"""Synthetic typed reports (docs/interfaces.md §6), built case by case in the tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from app.eval.report.records import MetricInfo, Report
from tests.support import reports as r

JUDGE_PROMPTS = r.JUDGE_PROMPTS
METRIC_SPECS: dict[str, MetricInfo] = {
    "faithfulness": r.info("higher", "judge", "score 1-5", "continuous"),
    "correctness": r.info("higher", "judge", "score 1-5", "continuous"),
    "refusal_rate": r.info("none", "deterministic", "rate", "binary"),
    "citation_accuracy": r.info("higher", "deterministic", "rate", "binary"),
    "tokens": r.info("lower", "deterministic", "tokens", "continuous", group="cost"),
    "latency_s": r.info("lower", "deterministic", "s", "continuous", group="cost"),
    "rewrite_accuracy": r.info("higher", "deterministic", "rate", "binary"),
    "acl_leak": r.info("lower", "deterministic", "rate", "binary", red_line=True),
}

ReportFactory = Callable[..., Report]


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
    run_id: str = r.RUN_ID,
    refused: Sequence[bool] | None = None,
) -> Report:
    n = len(next(iter(values.values())))
    ids = list(ids) if ids is not None else [f"kb-{i:03d}" for i in range(1, n + 1)]
    tags = list(tags) if tags is not None else [["hr"] if i % 2 else ["it"] for i in range(n)]
    cases = [
        r.case(
            cid,
            {name: vals[i] for name, vals in values.items()},
            tags=tags[i],
            refused=refused[i] if refused is not None else None,
        )
        for i, cid in enumerate(ids)
    ]
    return r.report(
        cases,
        {name: METRIC_SPECS[name] for name in values},
        run_id=run_id,
        judge=judge,
        judge_prompts=judge_prompts,
        candidate=candidate,
        prompts={"system/kb_qa": {"version": prompt_version, "hash": f"sha256:{prompt_version}"}},
        datasets=[
            {
                "name": "smoke",
                "version": dataset_version,
                "sha256": "d" * 64 if dataset_version == "1.0" else "e" * 64,
                "path": f"tests/eval/datasets/smoke_v{dataset_version}.jsonl",
            }
        ],
    )


@pytest.fixture
def make_report() -> ReportFactory:
    return build_report


@pytest.fixture
def write_report(tmp_path: Path) -> Callable[[str, Report | dict[str, object]], Path]:
    """Write a report as its file would be (a dict: an edited report, e.g. a broken one)."""

    def write(name: str, report: Report | dict[str, object]) -> Path:
        path = tmp_path / name
        data = report.model_dump(mode="json") if isinstance(report, Report) else report
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        return path

    return write
