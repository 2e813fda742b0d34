"""The delta table's verdicts from margins + CIs, Holm/BH, judge drift and offline rows.

Expected values come from outside our code: scipy's ``false_discovery_control`` (BH), a
textbook Holm example computed by hand, and the planted per-case values themselves.
"""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from app.eval.compare import compare_reports, comparison_markdown
from app.eval.report.records import Report
from app.eval.stats import significance
from tests.unit.compare.conftest import build_report

N = 43  # the smoke suite's size


def _row(cmp, metric):  # type: ignore[no-untyped-def]
    return next(r for r in cmp.rows if r.metric == metric)


def _with_answers(report: Report, answers: list[str]) -> Report:
    cases = [c.model_copy(update={"answer": a}) for c, a in zip(report.cases, answers, strict=True)]
    return report.model_copy(update={"cases": cases})


# ---------------------------------------------------------------- multiple comparisons


def test_holm_matches_a_hand_computed_textbook_example() -> None:
    # m = 4, sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04,
    # made monotone: 0.02, 0.03, 0.06, 0.06 (Holm 1979's step-down)
    assert significance.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # 2·0.5 = 1.0 (capped), then max(1.0, 1·0.9) = 1.0: the step-down never decreases
    assert significance.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert significance.holm([]) == []


def test_holm_equals_its_definition_on_random_p_values() -> None:
    rng = random.Random(3)
    for _ in range(50):
        ps = [rng.random() ** 3 for _ in range(rng.randint(1, 18))]
        m = len(ps)
        order = sorted(range(m), key=lambda i: ps[i])
        expected = [0.0] * m
        for k, i in enumerate(order):  # max over the smaller ones of (m − j)·p_(j)
            expected[i] = min(1.0, max((m - j) * ps[order[j]] for j in range(k + 1)))
        assert significance.holm(ps) == pytest.approx(expected, rel=1e-12)


def test_benjamini_hochberg_matches_scipy() -> None:
    rng = random.Random(4)
    for _ in range(50):
        ps = [rng.random() ** 2 for _ in range(rng.randint(1, 40))]
        ps += [1.0] * rng.randint(0, 5)  # unchanged tag × metric pairs
        expected = stats.false_discovery_control(ps, method="bh")
        assert significance.benjamini_hochberg(ps) == pytest.approx(list(expected), rel=1e-12)


def test_detectable_effect_and_cases_needed_by_hand() -> None:
    # (1.959964 + 0.841621) · 0.5 / √43 = 1.400793 / 6.557439 = 0.213619;
    # n = (2.801585 · 0.5 / 0.15)² = 87.2 → 88
    assert significance.detectable_effect(0.5, 43) == pytest.approx(0.213619, abs=1e-5)
    assert significance.cases_needed(0.5, 0.15) == 88
    assert significance.cases_needed(0.5, 0.0) is None


# ---------------------------------------------------------------- margins


def test_planted_four_case_citation_drop_on_smoke_is_inconclusive_not_green() -> None:
    base = [1.0] * N
    new = [1.0] * N
    for i in (3, 11, 20, 31):  # the planted drop: 4 cases of 43
        new[i] = 0.0
    cmp = compare_reports(
        build_report({"citation_accuracy": base}), build_report({"citation_accuracy": new})
    )
    r = _row(cmp, "citation_accuracy")
    assert r.p_value == pytest.approx(stats.binomtest(0, 4, 0.5).pvalue)  # 0.125
    assert r.verdict == "inconclusive" and r.symbol == "⚠️"
    assert r.ci95 is not None and r.ci95[0] < -0.05  # the data allow a drop past the margin
    text = comparison_markdown(cmp)
    assert "⚠️ inconclusive (CI crosses ±5.0 pp; smallest detectable Δ" in text
    assert "cases would resolve ±5.0 pp" in text


def test_ci_inside_the_margin_is_no_meaningful_change_and_crossing_is_inconclusive() -> None:
    rng = random.Random(7)
    base = [float(rng.randint(3, 5)) for _ in range(N)]
    tiny = list(base)
    tiny[0] += 0.1  # one case moved by a tenth: CI far inside ±0.15
    cmp = compare_reports(
        build_report({"faithfulness": base}), build_report({"faithfulness": tiny})
    )
    assert _row(cmp, "faithfulness").verdict == "no_change"
    wide = list(base)
    for i in range(0, N, 4):  # ±1 on a quarter of the cases, balanced: mean ≈ 0, CI wide
        wide[i] = base[i] + (1.0 if (i // 4) % 2 else -1.0)
    cmp = compare_reports(
        build_report({"faithfulness": base}), build_report({"faithfulness": wide})
    )
    r = _row(cmp, "faithfulness")
    assert r.ci95 is not None and (r.ci95[0] <= -0.15 or r.ci95[1] >= 0.15)
    assert r.verdict == "inconclusive"


@pytest.mark.parametrize("shift", [-0.15, -0.3, -1.0])
def test_a_judge_drop_of_at_least_the_margin_is_never_green(shift: float) -> None:
    rng = random.Random(11)
    base = [float(rng.randint(2, 4)) for _ in range(N)]
    new = list(base)
    moved = math.ceil(abs(shift) * N)  # −1 on `moved` cases: mean ≤ shift
    for i in rng.sample(range(N), min(N, moved)):
        new[i] = base[i] - 1.0
    cmp = compare_reports(build_report({"correctness": base}), build_report({"correctness": new}))
    r = _row(cmp, "correctness")
    assert r.delta is not None and r.delta <= -0.15 + 1e-9
    assert r.symbol != "✅", r


def test_holm_adjusts_the_rows_p_values_across_the_table() -> None:
    rng = random.Random(5)
    base = {
        m: [float(rng.randint(2, 5)) for _ in range(N)] for m in ("faithfulness", "correctness")
    }
    new = {m: list(v) for m, v in base.items()}
    for i in range(0, 12):
        new["faithfulness"][i] -= 1.0  # a real drop
    for i in range(3):
        new["correctness"][i] += 1.0 if i % 2 else -1.0
    cmp = compare_reports(build_report(base), build_report(new))
    raw = [_row(cmp, m).p_value for m in ("faithfulness", "correctness")]
    adjusted = [_row(cmp, m).p_adjusted for m in ("faithfulness", "correctness")]
    assert adjusted == pytest.approx(significance.holm(raw))  # type: ignore[arg-type]
    assert _row(cmp, "faithfulness").verdict == "regression"
    assert "Holm-adjusted" in comparison_markdown(cmp)


def test_tag_breakdown_q_values_are_benjamini_hochberg_over_every_pair() -> None:
    base = [4.0] * N
    new = list(base)
    tags = [["a"] if i < 20 else ["b"] for i in range(N)]
    for i in range(20):
        new[i] = 3.0  # tag a drops on every case
    new[25] = 5.0  # tag b improves on one case
    cmp = compare_reports(
        build_report({"faithfulness": base}, tags=tags),
        build_report({"faithfulness": new}, tags=tags),
    )
    pa = stats.wilcoxon(new[:20], base[:20]).pvalue
    pb = stats.wilcoxon(new[20:], base[20:]).pvalue
    q = stats.false_discovery_control([pa, pb], method="bh")
    assert cmp.tag_tests == 2
    assert [(t.tag, t.worse) for t in cmp.tag_regressions] == [("a", True)]  # b got better
    assert cmp.tag_regressions[0].q_value == pytest.approx(float(q[0]))


# ---------------------------------------------------------------- judge drift


def test_identical_answers_with_moved_judge_scores_is_judge_drift_not_regression() -> None:
    base = [4.0] * N
    new = [4.0 if i % 3 else 3.0 for i in range(N)]  # the judge moved on 15 cases
    answers = [f"answer {i} [1]" for i in range(N)]
    cmp = compare_reports(
        _with_answers(build_report({"faithfulness": base}), answers),
        _with_answers(build_report({"faithfulness": new}), answers),
    )
    r = _row(cmp, "faithfulness")
    assert r.p_value is not None and r.p_value < 0.001  # would have been ❌
    assert r.verdict == "judge_drift" and r.symbol == "⚠️"
    assert r.judge_only == r.moved == 15
    assert not cmp.has_regression
    assert len(cmp.judge_only) == 15
    assert "**Answers changed: 0 of 43; judge-only changes: 15**" in comparison_markdown(cmp)


def test_changed_answers_are_not_judge_drift() -> None:
    base = [4.0] * N
    new = [4.0 if i % 3 else 3.0 for i in range(N)]
    cmp = compare_reports(
        _with_answers(build_report({"faithfulness": base}), [f"a{i}" for i in range(N)]),
        _with_answers(build_report({"faithfulness": new}), [f"b{i}" for i in range(N)]),
    )
    r = _row(cmp, "faithfulness")
    assert r.verdict == "regression" and r.judge_only == 0


# ---------------------------------------------------------------- offline


def test_an_offline_candidate_leaves_answer_rows_not_measured() -> None:
    values = {
        "faithfulness": [4.0] * N,
        "citation_accuracy": [1.0] * N,
        "acl_leak": [0.0] * N,
        "tokens": [400.0] * N,
    }
    kw = {"candidate": "offline:extractive", "judge": "offline:reference-judge"}
    cmp = compare_reports(
        build_report(values, **kw), build_report(values, prompt_version="system/kb_qa_v2", **kw)
    )
    verdicts = {r.metric: r.verdict for r in cmp.rows}
    assert verdicts["faithfulness"] == verdicts["citation_accuracy"] == "not_measured"
    assert verdicts["acl_leak"] == "no_change" and verdicts["tokens"] == "no_change"
    assert cmp.unverified and "offline:extractive" in cmp.unverified
    md = comparison_markdown(cmp)
    assert "⚠️ unverified: no model ran" in md
    assert "`rag eval diff-prompt system/kb_qa v1 v2 --suite smoke --model " in md
    assert "✅" not in next(x for x in md.splitlines() if x.startswith("| faithfulness |"))


def test_an_offline_judge_leaves_only_judge_rows_not_measured() -> None:
    values = {"faithfulness": [4.0] * N, "citation_accuracy": [1.0] * N}
    kw = {"judge": "offline:reference-judge"}
    cmp = compare_reports(build_report(values, **kw), build_report(values, **kw))
    verdicts = {r.metric: r.verdict for r in cmp.rows}
    assert verdicts == {"faithfulness": "not_measured", "citation_accuracy": "no_change"}
    assert cmp.unverified and "offline:reference-judge" in cmp.unverified


def test_every_registered_metric_has_a_margin() -> None:
    from app.eval.scoring import specs
    from app.eval.scoring.thresholds import load_margins

    margins = load_margins()
    assert set(specs()) | {"refusal_rate"} <= set(margins)
    assert margins["citation_accuracy"] == margins["refusal_rate"] == 0.05
    assert 0.1 <= margins["faithfulness"] <= 0.2


def test_a_bad_margin_is_a_config_error_naming_the_entry(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.errors import ConfigError
    from app.eval.scoring.thresholds import load_margins

    bad = tmp_path / "t.toml"
    bad.write_text('version = "1"\n[margins]\nfaithfulness = "a lot"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[margins\] faithfulness must be a number"):
        load_margins(bad)


def test_latency_of_cached_answers_is_not_compared() -> None:
    warm = build_report({"latency_s": [None] * N})  # every answer from the cache
    cold = build_report({"latency_s": [0.8] * N})
    r = _row(compare_reports(cold, warm), "latency_s")
    assert r.verdict == "no_data" and r.symbol != "✅"
    assert r.reasons == ("no case measured in both: a cached answer carries no latency",)


def test_the_compare_page_says_unverified_and_counts_judge_only_changes() -> None:
    from app.view.pages import compare_page

    values = {"faithfulness": [4.0] * N, "citation_accuracy": [1.0] * N}
    kw = {"candidate": "offline:extractive", "judge": "offline:reference-judge"}
    base = build_report(values, **kw)
    new = build_report(values, prompt_version="system/kb_qa_v2", **kw)
    cmp = compare_reports(base, new)
    href = {c.id: f"#{c.id}" for c in base.cases}
    page = compare_page(base, new, cmp, href, "a.html", "b.html")
    assert (
        "⚠️ unverified: no model ran." in page and "rag eval diff-prompt system/kb_qa v1 v2" in page
    )
    assert "➖ not measured" in page and "judge-only changes: 0" in page
