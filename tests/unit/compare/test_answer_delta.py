"""Delta tables say how many answers changed; an offline baseline gets one "unverified" box."""

from __future__ import annotations

import json
from typing import Any

from app.eval.compare import compare_reports, comparison_markdown
from app.eval.report.records import Report
from tests.unit.compare.conftest import build_report


def _with_answers(report: Report, answers: list[str]) -> Report:
    cases = [c.model_copy(update={"answer": a}) for c, a in zip(report.cases, answers, strict=True)]
    return report.model_copy(update={"cases": cases})


def test_answers_changed_k_of_n_lists_the_cases() -> None:
    values = {"correctness": [4.0, 4.0, 4.0, 4.0]}
    base = _with_answers(build_report(values), ["a", "b", "c", "d"])
    new = _with_answers(
        build_report(values, prompt_version="system/kb_qa_v2"), ["a", "B", "c", "D"]
    )
    cmp = compare_reports(base, new)
    assert cmp.answers is not None and cmp.answers.changed == ("kb-002", "kb-004")
    md = comparison_markdown(cmp)
    assert "**Answers changed: 2 of 4; judge-only changes: 0** — `kb-002`, `kb-004`." in md
    assert "ignores the prompt's wording" not in md  # a model's run: no baseline note
    data = json.loads(cmp.to_json())
    assert data["answers"]["changed"] == ["kb-002", "kb-004"] and data["answers"]["paired"] == 4


def test_offline_baseline_with_changed_wording_speaks_with_one_voice() -> None:
    """The "⚠️ unverified: no model ran" box (with the command) is the only notice: no
    second note that the baseline ignores the wording, and no suggested `--max-tokens`
    that would cut a local judge's replies."""
    values = {"correctness": [3.0, 3.0]}
    kw: dict[str, Any] = {"candidate": "offline:extractive", "judge": "offline:reference-judge"}
    base = _with_answers(build_report(values, **kw), ["same", "same"])
    new = _with_answers(
        build_report(values, prompt_version="system/kb_qa_v3", **kw), ["same", "same"]
    )
    md = comparison_markdown(compare_reports(base, new))
    assert "**Answers changed: 0 of 2; judge-only changes: 0**." in md
    assert md.count("⚠️ unverified: no model ran") == 1
    assert "rag eval diff-prompt system/kb_qa v1 v3" in md
    assert "ignores the prompt's wording" not in md
    assert "--max-tokens" not in md
    # the same prompt on both sides: nothing to warn about
    same = compare_reports(base, _with_answers(build_report(values, **kw), ["x", "y"]))
    assert "ignores the prompt's wording" not in comparison_markdown(same)
    assert same.answers is not None and len(same.answers.changed) == 2


def test_unlisted_model_runs_are_named_in_the_table() -> None:
    values = {"correctness": [3.0]}
    base = build_report(values, candidate="openai:smollm2@http://127.0.0.1:8012/v1")
    pairs = [{"prompt": "system/kb_qa_v1", "model": "local:smollm2", "role": "candidate"}]
    base = base.model_copy(update={"meta": base.meta.model_copy(update={"unlisted_models": pairs})})
    md = comparison_markdown(compare_reports(base, build_report(values), base_name="A.json"))
    assert (
        "A.json: run with --allow-unlisted-model — `local:smollm2` is outside "
        "APPLICABLE_MODELS of system/kb_qa_v1" in md
    )
