"""The runner on the private ``mini`` suite with the real offline pipeline and judge."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from app.eval.config import RunConfig
from app.eval.report.io import load_report, validate_report
from app.eval.report.records import Report
from app.eval.run.runner import run_sync
from app.llm.engine import Engine, EngineConfig
from app.llm.spec import ModelRef
from app.llm.types import ChatRequest, Completion

# latency is a measurement of the machine, not a score of the case: it is the one metric
# two identical runs may legitimately disagree on.
TIMING = {"latency_s"}


def per_case(report: Report) -> dict[str, dict[str, Any]]:
    return {
        c.id: {
            name: (s.value, s.reason, s.samples)
            for name, s in c.metrics.items()
            if name not in TIMING
        }
        for c in report.cases
    }


def test_report_is_schema_valid_and_complete(eval_root: Path) -> None:
    out = run_sync(RunConfig(suite="mini", cache=False), out_dir=eval_root / "reports")
    assert out.path is not None and out.path.name.startswith("eval_")
    data = json.loads(out.path.read_text(encoding="utf-8"))
    validate_report(data)
    assert out.path.with_suffix(".md").exists()
    assert [c["id"] for c in data["cases"]] == [f"mini-00{i}" for i in range(1, 6)]
    assert data["meta"]["candidate"] == {"provider": "offline:extractive", "offline": True}
    # its repr names the run, not the summary (asyncio.run formats the finished task's
    # result on its way out: a summary's repr grows with the cases)
    assert out.run_id in repr(out) and "summary" not in repr(out)
    assert data["meta"]["judge"]["offline"] is True and data["meta"]["judge"]["samples"] == 3
    assert set(data["meta"]["judge"]["prompts"]) == {
        "judge/correctness",
        "judge/faithfulness",
        "judge/relevance",
    }
    assert data["meta"]["prompts"]["system/kb_qa"]["hash"].startswith("sha256:")
    assert (
        data["meta"]["datasets"][0]["name"] == "mini"
        and len(data["meta"]["datasets"][0]["sha256"]) == 64
    )
    assert data["meta"]["thresholds"]["sha256"].startswith("sha256:")
    assert data["totals"]["cases_done"] == 5 and data["partial"] is False
    for case in data["cases"]:
        for name, score in case["metrics"].items():
            assert score["value"] is None or math.isfinite(score["value"]), (case["id"], name)
            assert score["value"] is not None or score["reason"], (case["id"], name)
        assert len(case["metrics"]["faithfulness"]["samples"]) == 3
    # the refused ACL case (mini-003) and the injection case (mini-004) have defined scores
    for cid in ("mini-003", "mini-004"):
        case = next(c for c in data["cases"] if c["id"] == cid)
        assert case["refused"] is True
        for name in ("faithfulness", "relevance", "correctness", "refusal_error", "acl_leak"):
            assert isinstance(case["metrics"][name]["value"], float), (cid, name)
    assert out.exit_code == (0 if data["status"] == "pass" else 1)


def test_shuffled_case_order_gives_identical_scores(eval_root: Path) -> None:
    cfg = RunConfig(suite="mini", cache=False, concurrency=2)
    forward = run_sync(cfg, write=False)
    backward = run_sync(cfg, write=False, case_order=lambda cases: list(reversed(cases)))
    interleaved = run_sync(cfg, write=False, case_order=lambda cases: cases[1::2] + cases[::2])
    assert per_case(forward.report) == per_case(backward.report) == per_case(interleaved.report)
    assert forward.report.summary["faithfulness"] == backward.report.summary["faithfulness"]
    assert forward.report.bad_cases == backward.report.bad_cases


class BrokenJudge(Engine):
    """The real engine, except that faithfulness judge replies for one case are garbage."""

    async def generate(
        self, provider: ModelRef | str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        completion = await super().generate(provider, request, sample_index)
        if (
            request.purpose == "judge"
            and request.metadata.get("judge_metric") == "faithfulness"
            and "12%" in request.variables.get("candidate", "")
        ):
            return Completion(
                text="The answer looks faithful to me!", provider="offline", model="x"
            )
        return completion


def test_injected_judge_parse_failure_is_counted_not_scored(eval_root: Path) -> None:
    engine = BrokenJudge(EngineConfig(cache=False))
    out = run_sync(RunConfig(suite="mini", cache=False), engine=engine, write=False)
    report = out.report
    broken = report.case("mini-002")
    assert broken is not None
    faith = broken.metrics["faithfulness"]
    assert faith.value is None
    assert faith.n_errors == 3 and faith.reason is not None and "judge error" in faith.reason
    assert any("faithfulness" in e for e in broken.errors)
    summary = report.summary["faithfulness"]
    assert summary.n == 4 and summary.n_errors == 1
    assert report.totals.judge_errors == 1
    # the other judge metrics of that case are still scores
    assert isinstance(broken.metrics["correctness"].value, float)
    # the one bad-case policy lists the judge error as a hard reason of that case
    bad = report.bad_case("mini-002")
    assert bad is not None
    assert [r.kind for r in bad.hard] == ["error"]
    assert "faithfulness" in bad.hard[0].message
    assert validate_report(json.loads(report.model_dump_json())) == report


def test_max_cost_writes_a_partial_report(eval_root: Path) -> None:
    # offline runs cost 0, so a budget of 0 is reached before the first case
    out = run_sync(
        RunConfig(suite="mini", cache=False, max_cost=0.0), out_dir=eval_root / "reports"
    )
    assert out.report.partial is True and out.report.status == "partial"
    assert out.report.partial_reason is not None and "--max-cost" in out.report.partial_reason
    assert out.report.totals.cases_done == 0
    assert out.exit_code == 1
    assert out.path is not None
    assert load_report(out.path) == out.report


class TimedOutCandidate(Engine):
    """The real engine, except that the candidate's answer to one case times out."""

    async def generate(
        self, provider: ModelRef | str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        from app.errors import ProviderError

        text = json.dumps(request.variables, ensure_ascii=False)
        if request.purpose == "generation" and "12%" in text:
            # what the engine raises when no answer came within timeout_s (app.llm.engine)
            raise ProviderError(
                f"{provider}: no answer within 60s (timed out)", provider=str(provider)
            )
        return await super().generate(provider, request, sample_index)


def test_a_candidate_timeout_is_an_answer_error_not_a_judge_error(eval_root: Path) -> None:
    engine = TimedOutCandidate(EngineConfig(cache=False))
    report = run_sync(RunConfig(suite="mini", cache=False), engine=engine, write=False).report
    failed = [c for c in report.cases if c.answer is None]
    assert len(failed) == 1 and "timed out" in failed[0].errors[0]
    assert report.totals.cases_with_errors == 1
    # no judge was asked about that case, so no judge sample failed
    assert report.totals.judge_errors == 0
    assert all(s.samples is None for s in failed[0].metrics.values())
