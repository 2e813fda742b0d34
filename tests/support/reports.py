"""Typed synthetic reports for the tests of what reads a report (compare, gates, CI glue,
HTML, the Langfuse export): a :class:`~app.eval.report.records.Report` built case by case, with the
summary and bad cases computed by the harness's own functions from those cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from app.eval.config import Gate, RunConfig
from app.eval.report.io import bad_cases, refusal_confusion
from app.eval.report.records import (
    SCHEMA_VERSION,
    Breakdowns,
    CandidateInfo,
    CaseResult,
    DatasetRef,
    Distribution,
    GitState,
    JudgeInfo,
    MetricInfo,
    MetricVerdict,
    PromptRef,
    Report,
    RunMeta,
    ThresholdsRef,
    Totals,
)
from app.eval.report.status import run_status
from app.eval.scoring.base import Score
from app.eval.stats.describe import describe

RUN_ID = "20261130T190000Z-ab12cd"
JUDGE_PROMPTS = {
    "judge/faithfulness": {"version": "judge/faithfulness_v1", "hash": "sha256:aaa111"},
    "judge/correctness": {"version": "judge/correctness_v1", "hash": "sha256:bbb222"},
}


def info(
    direction: Literal["higher", "lower", "none"] = "higher",
    kind: Literal["deterministic", "judge"] = "deterministic",
    unit: str = "rate",
    scale: Literal["binary", "continuous"] = "binary",
    red_line: bool = False,
    group: str = "",
) -> MetricInfo:
    return MetricInfo(
        direction=direction, kind=kind, unit=unit, scale=scale, red_line=red_line, group=group
    )


def score(value: float | None, reason: str | None = None, **kw: Any) -> Score:
    if value is None and reason is None:
        reason = "judge error"
    return Score(value=value, reason=reason, **kw)


def case(
    cid: str,
    values: Mapping[str, float | Score | None],
    *,
    tags: Sequence[str] = ("hr",),
    difficulty: str | None = "easy",
    refused: bool | None = False,
    answer: str | None = "",
    question: str = "",
    errors: Sequence[str] = (),
    red_lines: Sequence[str] = (),
    expected_refusal: bool = False,
    cost_usd: float = 0.0,
) -> CaseResult:
    metrics = {name: v if isinstance(v, Score) else score(v) for name, v in values.items()}
    return CaseResult(
        id=cid,
        question=question,
        tags=list(tags),
        difficulty=difficulty,
        expected_refusal=expected_refusal,
        metrics=metrics,
        answer=answer,
        refused=refused,
        trace=None,
        errors=list(errors),
        red_lines=list(red_lines),
        cost_usd=cost_usd,
    )


def report(
    cases: Sequence[CaseResult],
    metrics: Mapping[str, MetricInfo],
    *,
    run_id: str = RUN_ID,
    judge: str | None = "anthropic:claude-opus-4-7",
    judge_samples: int = 3,
    judge_prompts: Mapping[str, Mapping[str, str]] | None = None,
    candidate: str = "anthropic:claude-sonnet-4-6",
    prompts: Mapping[str, Mapping[str, str]] | None = None,
    datasets: Sequence[Mapping[str, str]] | None = None,
    verdicts: Mapping[str, MetricVerdict] | None = None,
    partial_reason: str | None = None,
    status: Literal["pass", "fail", "partial"] | None = None,
    suite: str = "smoke",
    bad_judge_score: float = 3.0,
    gate: Gate = "thresholds",
) -> Report:
    summary = {
        name: Distribution.model_validate(
            describe([c.value(name) for c in cases if name in c.metrics], unit=m.unit)
        )
        for name, m in metrics.items()
    }
    jp = judge_prompts if judge_prompts is not None else JUDGE_PROMPTS
    pr = prompts or {"system/kb_qa": {"version": "system/kb_qa_v1", "hash": "sha256:v1"}}
    ds = datasets or [
        {
            "name": suite,
            "version": "1.0",
            "sha256": "d" * 64,
            "path": f"tests/eval/datasets/{suite}_v1.0.jsonl",
        }
    ]
    partial = partial_reason is not None
    verdict_map = dict(verdicts or {})
    # the run's one status, by the harness's own rule (app.eval.report.status)
    computed = run_status(
        gate=gate,
        verdicts=verdict_map,
        red_lines=[name for name, m in metrics.items() if m.red_line],
        partial_reason=partial_reason,
        cases_done=len(cases),
        cases_planned=len(cases),
        candidate_offline=candidate.startswith("offline:"),
        judge_offline=bool(judge and judge.startswith("offline:")),
    )
    return Report(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        created_at="2026-11-30T19:00:00Z",
        status=status or computed.status,
        status_line=computed.line if status is None else None,
        partial=partial,
        partial_reason=partial_reason,
        meta=RunMeta(
            git=GitState(sha="0" * 40, dirty=False),
            command=["rag", "eval", "run", "--suite", suite],
            front_end="cli",
            suite=suite,
            seed=0,
            k=5,
            resumed_from=None,
            candidate=CandidateInfo(provider=candidate, offline=candidate.startswith("offline:")),
            judge=JudgeInfo(
                provider=judge,
                offline=judge.startswith("offline:") if judge else None,
                samples=judge_samples if judge else 0,
                allow_weak=False,
                warnings=[],
                prompts={k: PromptRef.model_validate(v) for k, v in jp.items()} if judge else {},
            ),
            prompts={k: PromptRef.model_validate(v) for k, v in pr.items()},
            datasets=[DatasetRef.model_validate(d) for d in ds],
            thresholds=ThresholdsRef(
                path="app/eval/scoring/thresholds.toml",
                version="1.1",
                sha256="sha256:" + "t" * 64,
                suite=suite,
                bad_judge_score=bad_judge_score,
            ),
            config=RunConfig(suite=suite, model=candidate, judge=judge, gate=gate),
        ),
        metrics=dict(metrics),
        totals=Totals(
            cases_planned=len(cases),
            cases_done=len(cases),
            cases_with_errors=sum(1 for c in cases if c.errors),
            judge_errors=0,
            cost_usd=sum(c.cost_usd for c in cases),
            candidate_cost_usd=sum(c.cost_usd for c in cases),
            judge_cost_usd=0.0,
            duration_s=1.0,
            engine=None,
        ),
        summary=summary,
        verdicts=verdict_map,
        breakdowns=Breakdowns(by_tag={}, by_difficulty={}),
        refusal_confusion=refusal_confusion(c.metrics for c in cases),
        bad_cases=bad_cases(cases, metrics, bad_judge_score),
        cases=list(cases),
    )


def verdict(name: str, outcome: Literal["pass", "fail", "no_data"]) -> MetricVerdict:
    return MetricVerdict(
        threshold=">= 0.5",
        min=0.5,
        max=None,
        value=None if outcome == "no_data" else (0.9 if outcome == "pass" else 0.1),
        n=0 if outcome == "no_data" else 10,
        n_errors=0,
        verdict=outcome,
        reason=None if outcome == "pass" else f"{name}: {outcome}",
    )


def run_smoke(out: Path, limit: int) -> Path:
    """A real offline ``rag eval run --suite smoke --limit N`` into ``out``: its report's path
    (for the readers' tests that want a report the run wrote, not a synthetic one)."""
    from click.testing import CliRunner

    from app.cli.eval import cli

    res = CliRunner().invoke(
        cli, ["run", "--suite", "smoke", "--limit", str(limit), "--quiet", "--out", str(out)]
    )
    assert res.exit_code in (0, 1), res.output
    (path,) = out.glob("eval_*.json")
    return path
