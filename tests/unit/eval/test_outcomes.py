"""Per-case blame: one outcome class per case by one rule, counted in the report summary
and shown as "new failures by cause" in the delta table.

The rule's cases are written by hand from its documented order (app/eval/report/outcome.py);
the shipped suites are then run offline and every case must carry a class that the summary
counts; a comparison of two runs lists the cases that fail newly, by cause.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.eval.compare import compare_reports, comparison_markdown
from app.eval.config import RunConfig
from app.eval.report.outcome import OUTCOMES, case_outcome
from app.eval.report.records import CaseResult, Report
from app.eval.run.runner import run_sync
from app.eval.scoring.base import Score

BAR = 3.0  # thresholds.toml [bad_cases] bad_judge_score


def _case(
    *,
    expected_refusal: bool = False,
    refused: bool | None = False,
    answer: str | None = "answer [1]",
    **values: float | None,
) -> CaseResult:
    metrics = {
        name: Score(value=v) if v is not None else Score.undefined("the answer cites nothing")
        for name, v in values.items()
    }
    return CaseResult(
        id="c1", question="q", tags=["t"], difficulty=None, expected_refusal=expected_refusal,
        metrics=metrics, answer=answer, refused=refused, trace=None,
        errors=[] if answer is not None else ["pipeline error: boom"], red_lines=[], cost_usd=0.0,
    )  # fmt: skip


GOOD: dict[str, Any] = {
    "hit_rate": 1.0,
    "completeness": 1.0,
    "citation_accuracy": 1.0,
    "faithfulness": 5.0,
    "acl_leak": 0.0,
    "must_not_include": 0.0,
}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (_case(**GOOD), "correct"),
        (_case(answer=None), "not_evaluated"),
        # an ACL leak outranks everything else, a missed refusal included
        (_case(**{**GOOD, "acl_leak": 1.0, "hit_rate": 0.0}), "acl_leak"),
        (_case(expected_refusal=True, refused=False, acl_leak=0.0), "missed_refusal"),
        (_case(expected_refusal=True, refused=True, acl_leak=0.0), "correct"),
        (_case(**{**GOOD}, refused=True), "wrong_refusal"),
        # the cause first: nothing golden retrieved, whatever the answer then says
        (_case(**{**GOOD, "hit_rate": 0.0, "faithfulness": 1.0}), "retrieval_miss"),
        (_case(**{**GOOD, "faithfulness": 2.99}), "unsupported_claim"),
        (_case(**{**GOOD, "faithfulness": 3.0}), "correct"),  # the bar itself is not below it
        (_case(**{**GOOD, "must_not_include": 1.0}), "unsupported_claim"),
        (_case(**{**GOOD, "completeness": 0.5, "faithfulness": 1.0}), "unsupported_claim"),
        (_case(**{**GOOD, "completeness": 0.5}), "retrieved_unused"),
        (_case(**{**GOOD, "citation_accuracy": 0.0}), "retrieved_unused"),
        (_case(**{**GOOD, "citation_accuracy": None}), "retrieved_unused"),  # cites nothing
        (_case(**{**GOOD, "citation_accuracy": 0.5}), "correct"),  # cites a golden chunk too
        # a case without labels: no retrieval rule applies
        (_case(acl_leak=0.0, completeness=1.0), "correct"),
    ],
)
def test_the_rule(case: CaseResult, expected: str) -> None:
    assert case_outcome(case, BAR) == expected


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Report:
    runs = tmp_path_factory.mktemp("runs")
    return run_sync(RunConfig(suite="smoke"), runs_root=runs, write=False).report


def test_every_case_has_a_class_and_the_summary_counts_them(smoke: Report) -> None:
    assert all(c.outcome in OUTCOMES for c in smoke.cases)
    assert list(smoke.outcomes) == list(OUTCOMES)
    for outcome, n in smoke.outcomes.items():
        assert n == sum(1 for c in smoke.cases if c.outcome == outcome)
    assert sum(smoke.outcomes.values()) == len(smoke.cases)
    bar = smoke.meta.thresholds.bad_judge_score
    assert all(c.outcome == case_outcome(c, bar) for c in smoke.cases)
    # a failing class is never given to a case the bad-case policy calls fine on every count
    # it shares: a refusal error is a refusal class, an ACL leak its own
    for c in smoke.cases:
        cell = c.metrics["refusal_error"].detail.get("cell")
        if cell == "missed_refusal":
            assert c.outcome in ("missed_refusal", "acl_leak")
        if cell == "false_refusal":
            assert c.outcome in ("wrong_refusal", "acl_leak")


def test_the_delta_table_lists_new_failures_by_cause(smoke: Report, tmp_path: Path) -> None:
    base = smoke
    # the new run: one correct case now misses retrieval, another answers without its facts
    correct = [c for c in base.cases if c.outcome == "correct"]
    miss, unused = correct[0], correct[1]

    def worse(c: CaseResult, **values: float) -> CaseResult:
        metrics = dict(c.metrics)
        for name, v in values.items():
            metrics[name] = Score(value=v)
        changed = c.model_copy(update={"metrics": metrics, "outcome": None})
        return changed.model_copy(update={"outcome": case_outcome(changed, BAR)})

    cases = [
        worse(c, hit_rate=0.0) if c.id == miss.id
        else worse(c, completeness=0.0) if c.id == unused.id
        else c
        for c in base.cases
    ]  # fmt: skip
    new = base.model_copy(update={"cases": cases, "run_id": base.run_id[:-1] + "f"})
    comparison = compare_reports(base, new)
    assert comparison.new_failures == (
        ("retrieval_miss", (miss.id,)),
        ("retrieved_unused", (unused.id,)),
    )
    md = comparison_markdown(comparison)
    assert "**New failures by cause:** +1 retrieval miss, +1 retrieved but unused" in md
    assert f"- retrieval miss: {miss.id}" in md
    assert json.loads(comparison.to_json())["new_failures"] == [
        ["retrieval_miss", [miss.id]],
        ["retrieved_unused", [unused.id]],
    ]
    same = comparison_markdown(compare_reports(base, base))
    assert "**New failures by cause:** none." in same
    # a report written before outcome classes: no section at all (not "none")
    old = base.model_copy(
        update={"cases": [c.model_copy(update={"outcome": None}) for c in base.cases]}
    )
    assert "New failures by cause" not in comparison_markdown(compare_reports(old, new))
