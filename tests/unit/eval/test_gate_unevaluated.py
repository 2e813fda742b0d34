"""Unevaluated is not passed (issue 12): `--gate red-lines` exited 0 on a run where most
cases errored, because an errored case dropped out of the ACL-leak count."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.eval import gate_exit_code
from app.errors import ProviderError
from app.eval.config import RunConfig
from app.eval.report.render import render_markdown
from app.eval.run.runner import run_sync
from app.eval.scoring.thresholds import load_thresholds, verdicts
from app.llm.engine import Engine, EngineConfig
from app.llm.spec import ModelRef
from app.llm.types import ChatRequest, Completion


class FailingCandidate(Engine):
    """The real engine, except that the candidate call of one question always fails."""

    def __init__(self, marker: str) -> None:
        super().__init__(EngineConfig(cache=False))
        self.marker = marker

    async def generate(
        self, provider: ModelRef, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        if request.purpose == "generation" and self.marker in request.variables.get("question", ""):
            raise ProviderError("injected: the provider is down", provider=provider.raw, status=503)
        return await super().generate(provider, request, sample_index)


def _mini_question(root: Path, case_id: str) -> str:
    import json

    for line in (root / "tests/eval/datasets/mini_v1.0.jsonl").read_text().splitlines():
        case = json.loads(line)
        if case["id"] == case_id:
            return str(case["question"])
    raise AssertionError(case_id)


def test_red_line_gate_fails_when_a_case_it_depends_on_errored(
    eval_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    question = _mini_question(eval_root, "mini-003")
    config = RunConfig(suite="mini", cache=False, gate="red-lines")
    out = run_sync(config, engine=FailingCandidate(question), write=False)
    report = out.report
    errored = report.case("mini-003")
    assert errored is not None and errored.errors
    acl = report.verdicts["acl_leak"]
    assert acl.n_errors == 1 and acl.verdict == "fail", acl
    assert acl.reason is not None and "not evaluated" in acl.reason
    assert gate_exit_code(report) == 1
    assert "acl_leak" in capsys.readouterr().err
    assert "evaluated 4 of 5 cases" in render_markdown(report)


def test_max_errors_tolerates_a_share_of_unevaluated_cases(eval_root: Path) -> None:
    question = _mini_question(eval_root, "mini-003")
    config = RunConfig(suite="mini", cache=False, max_errors=0.25)
    report = run_sync(config, engine=FailingCandidate(question), write=False).report
    assert report.verdicts["acl_leak"].verdict == "pass"  # 1 of 5 ≤ 25 %
    strict = RunConfig(suite="mini", cache=False, max_errors=0.1)
    report = run_sync(strict, engine=FailingCandidate(question), write=False).report
    assert report.verdicts["acl_leak"].verdict == "fail"  # 1 of 5 > 10 %


def test_verdicts_count_unevaluated_cases_for_every_threshold() -> None:
    ths = load_thresholds("smoke")
    summary = {
        "acl_leak": {"mean": 0.0, "n": 30, "n_errors": 70},
        "correctness": {"mean": 4.6, "n": 99, "n_errors": 1},
        "faithfulness": {"mean": 4.6, "n": 100, "n_errors": 0},
    }
    got = verdicts(ths, summary, {"acl_leak": 0}, max_errors=0.0)
    assert got["acl_leak"]["verdict"] == "fail"
    assert "70 of 100 case(s) not evaluated" in got["acl_leak"]["reason"]
    assert got["correctness"]["verdict"] == "fail"
    assert got["faithfulness"]["verdict"] == "pass"
    relaxed = verdicts(ths, summary, {"acl_leak": 0}, max_errors=0.05)
    assert relaxed["correctness"]["verdict"] == "pass"  # 1 % ≤ 5 %
    assert relaxed["acl_leak"]["verdict"] == "fail"  # 70 % > 5 %


def test_a_red_line_without_a_threshold_also_fails_when_unevaluated() -> None:
    ths = load_thresholds("smoke")
    got = verdicts(ths, {"secret_leak": {"mean": 0.0, "n": 3, "n_errors": 2}}, {"secret_leak": 0})
    assert got["secret_leak"]["verdict"] == "fail"
    assert "2 of 5 case(s) not evaluated" in got["secret_leak"]["reason"]
