"""``--repeat K``: the candidate sampled K times per case, flip rate and spread, unstable cases
left out of the delta table's verdicts; an offline baseline asked once; a weak judge's rows.

The sampled runs go against a local OpenAI-compatible server whose replies are planted to
vary per sample: two of six smoke cases answer, refuse, answer on their 1st, 2nd, 3rd call
(the samples are asked together, so which sample gets which call is not fixed).
Expected values are counted by hand from that plan (flip rate 1/3: one of three samples
differs from the most common outcome).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.eval.compare import compare_files, compare_reports, comparison_markdown
from app.eval.report.records import Sample
from app.eval.run.repeat import summarise
from app.paths import PACKAGE_DIR
from tests.support.fake_llm_server import FakeLLMServer
from tests.unit.compare.conftest import build_report

CANDIDATE, JUDGE = "qwen2-7b", "gpt-4o"
REJECTION = "抱歉，根据现有资料无法确定该问题的答案，建议联系相关部门确认。"  # kb_qa_v2's
ANSWER = "根据参考资料，答案见文档 [1]。"
SMOKE = PACKAGE_DIR.parent / "tests/eval/datasets/smoke_v1.0.jsonl"
FLAKY_IDS = ("smoke-002", "smoke-003")


class Flaky:
    """The candidate answers every case the same, except the flaky questions: on their
    1st, 3rd, … call an answer, on their 2nd, 4th, … the prompt's rejection."""

    def __init__(self, questions: set[str]) -> None:
        self.questions = questions
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: Any) -> str:
        if body["model"] == JUDGE:
            return json.dumps({"score": 4, "reasoning": "planted"})
        text = json.dumps(body, ensure_ascii=False)
        question = next((q for q in self.questions if q in text), None)
        if question is None:
            return ANSWER
        with self.lock:
            n = self.calls[question]
            self.calls[question] += 1
        return REJECTION if n % 2 else ANSWER


def _run(out: Path, *extra: str) -> Path:
    args = ["--out", str(out), *extra]
    with pytest.raises(SystemExit) as exc:
        main(["eval", "run", "--suite", "smoke", "--dataset-version", "1.0", "--quiet", *args])
    assert exc.value.code in (0, 1, None)
    [path] = sorted(out.glob("eval_*.json"))
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))
    return tmp_path


@pytest.mark.slow  # two runs of six cases x three samples against the local server (~10 s)
def test_samples_are_asked_apart_scored_and_unstable_cases_leave_the_verdicts(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = {
        (row := json.loads(line))["id"]: row["question"]
        for line in SMOKE.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    planted = Flaky({questions[i] for i in FLAKY_IDS})
    with FakeLLMServer(responder=planted) as srv:
        url = srv.openai_base_url
        args = ["--limit", "6", "--repeat", "3", "--judge-samples", "1", "--retriever", "bm25"]
        args += ["--metrics", "deterministic,faithfulness"]
        args += ["--model", f"openai:{CANDIDATE}@{url}", "--judge", f"openai:{JUDGE}@{url}"]
        first = _run(env / "first", *args)
        sent = srv.stats()["requests"]
        again = _run(env / "again", *args)  # the cache is warm: every sample replayed
        assert srv.stats()["requests"] == sent
    # three candidate calls per flaky question: the cache did not replay sample 0 for 1 and 2
    assert all(planted.calls[questions[i]] == 3 for i in FLAKY_IDS)
    assert "--repeat 3: unstable cases 2 of 6 (" in capsys.readouterr().out
    report = json.loads(first.read_text(encoding="utf-8"))
    assert report["totals"]["cases_unstable"] == 2
    assert "- --repeat 3: unstable cases 2 of 6 (" in first.with_suffix(".md").read_text("utf-8")
    cases = {c["id"]: c for c in report["cases"]}
    assert len(cases) == 6
    for cid, case in cases.items():
        rep = case["repeat"]
        assert [s["index"] for s in rep["samples"]] == [0, 1, 2]
        assert all("faithfulness" in s["values"] for s in rep["samples"])  # each one scored
        if cid in FLAKY_IDS:
            # the samples are asked together: which one got the 2nd call is not fixed
            assert sorted(s["refused"] for s in rep["samples"]) == [False, False, True]
            assert rep["flip_rate"] == pytest.approx(1 / 3)
            assert rep["unstable"] and "flipped" in rep["reasons"][0]
            assert len({s["answer_sha"] for s in rep["samples"]}) == 2
        else:
            assert rep["flip_rate"] == 0 and not rep["unstable"], rep["reasons"]
            assert len({s["answer_sha"] for s in rep["samples"]}) == 1
    replayed = {c["id"]: c for c in json.loads(again.read_text(encoding="utf-8"))["cases"]}
    for cid, case in cases.items():  # sample i replayed for sample i
        shas = [s["answer_sha"] for s in case["repeat"]["samples"]]
        assert [s["answer_sha"] for s in replayed[cid]["repeat"]["samples"]] == shas

    cmp = compare_files(first, again)
    assert cmp.unstable == FLAKY_IDS and cmp.paired == 6 and cmp.samples == (3, 3)
    assert max(r.n for r in cmp.rows) == 4  # the verdicts read the four stable cases only
    md = comparison_markdown(cmp)
    assert "**Unstable cases: 2 of 6** across --repeat 3 samples" in md
    assert "use the 4 stable case(s); left out: smoke-002, smoke-003." in md


def test_an_offline_baseline_is_asked_once_and_says_so(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _run(env / "off", "--limit", "2", "--repeat", "3")
    assert "deterministic — its 3 samples would be identical" in capsys.readouterr().err
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["meta"]["config"]["repeat"] == 3
    assert all(c["repeat"] is None for c in report["cases"])
    assert report["totals"]["cases_unstable"] is None  # nothing was sampled
    written = path.with_suffix(".md").read_text(encoding="utf-8")
    assert "- --repeat 3: the candidate offline:extractive is an offline baseline" in written
    md = comparison_markdown(compare_files(path, path))
    assert "its 3 samples would be identical, so each case was asked once" in md
    assert "Unstable cases" not in md
    from app.eval.report.io import load_report
    from app.view import pages

    loaded = load_report(path)
    hrefs = {c.id: c.id for c in loaded.cases}
    html = pages.compare_page(loaded, loaded, compare_reports(loaded, loaded), hrefs, "a", "b")
    assert "its 3 samples would be identical, so each case was asked once" in html


def _sample(index: int, refused: bool, passed: bool, **values: float | None) -> Sample:
    return Sample(index=index, answer_sha=str(index), refused=refused, passed=passed, values=values)


def test_flip_rate_and_spread_by_hand() -> None:
    margins = {"faithfulness": 0.15, "latency_s": 0.25, "citation_accuracy": 0.05}
    same = [_sample(i, False, True, faithfulness=4.0, latency_s=0.1 * i) for i in range(4)]
    rep = summarise(same, margins)
    # latency spread 0.3 > its margin 0.25 but a cost moves with the machine: not counted
    assert rep.flip_rate == 0 and rep.spread["latency_s"] == pytest.approx(0.3)
    assert not rep.unstable
    # 4 samples: refused once, failed once (two differ from the most common outcome) → 2/4
    mixed = [
        _sample(0, False, True, faithfulness=4.0),
        _sample(1, True, True, faithfulness=4.0),
        _sample(2, False, False, faithfulness=4.0),
        _sample(3, False, True, faithfulness=4.0),
    ]
    assert summarise(mixed, margins).flip_rate == pytest.approx(0.5)
    # the outcome held, a judge score spread 4 − 3.8 = 0.2 > 0.15
    spread = [_sample(0, False, True, faithfulness=4.0), _sample(1, False, True, faithfulness=3.8)]
    rep = summarise(spread, margins)
    assert rep.flip_rate == 0 and rep.unstable
    assert rep.spread["faithfulness"] == pytest.approx(0.2)
    assert rep.reasons == ["faithfulness spread 0.2 > margin 0.15"]
    failed = [
        _sample(0, False, True),
        Sample(index=1, answer_sha=None, refused=None, passed=None, values={}, error="boom"),
    ]
    rep = summarise(failed, margins)
    assert rep.unstable and "failed" in rep.reasons[0]  # never silently stable


def test_a_weak_judge_never_gives_a_judge_row_a_green_or_red_verdict() -> None:
    n = 43
    base = build_report({"faithfulness": [4.0] * n, "citation_accuracy": [1.0] * n})
    worse = build_report(
        {"faithfulness": [2.0] * 20 + [4.0] * 23, "citation_accuracy": [1.0] * n},
        prompt_version="system/kb_qa_v2",
    )
    for new in (base, worse):  # unchanged: would be ✅; 20 cases judged 2: would be ❌
        weak = new.model_copy(
            update={
                "meta": new.meta.model_copy(
                    update={"judge": new.meta.judge.model_copy(update={"weak": True})}
                )
            }
        )
        cmp = compare_reports(base, weak)
        rows = {r.metric: r for r in cmp.rows}
        assert rows["faithfulness"].verdict == "weak_judge" and rows["faithfulness"].symbol == "⚠️"
        assert "weak judge" in rows["faithfulness"].reasons[0]
        assert rows["citation_accuracy"].verdict == "no_change"  # not a judge row
        assert not cmp.has_regression and cmp.needs_review
    assert "would read: significant regression" in rows["faithfulness"].reasons[1]


def _flag_unstable(report, ids):  # type: ignore[no-untyped-def]
    def mark(case):  # type: ignore[no-untyped-def]
        samples = [_sample(0, False, True), _sample(1, True, False)]
        return case.model_copy(update={"repeat": summarise(samples, {})})

    cases = [mark(c) if c.id in ids else c for c in report.cases]
    config = report.meta.config.replace(repeat=2)
    meta = report.meta.model_copy(update={"config": config})
    return report.model_copy(update={"cases": cases, "meta": meta})


def test_unstable_cases_cannot_make_a_regression_and_all_unstable_is_refused() -> None:
    from app.errors import ReportError

    n = 43
    base = build_report({"faithfulness": [4.0] * n})
    # 8 cases judged 1 instead of 4: a regression when they count (checked first)
    new = build_report({"faithfulness": [1.0] * 8 + [4.0] * (n - 8)})
    assert next(r for r in compare_reports(base, new).rows).verdict == "regression"
    flaky = [f"kb-{i:03d}" for i in range(1, 9)]  # those 8 were unstable in the new run
    cmp = compare_reports(base, _flag_unstable(new, flaky))
    row = cmp.rows[0]
    assert row.n == n - 8 and row.verdict == "no_change"
    assert cmp.unstable == tuple(flaky) and cmp.paired == n and not cmp.has_regression
    assert "**Unstable cases: 8 of 43** across --repeat 1/2 samples" in comparison_markdown(cmp)
    with pytest.raises(ReportError, match="every one of the 43 paired case"):
        compare_reports(base, _flag_unstable(new, [c.id for c in new.cases]))
