"""The delta table's verdicts and p-values on synthetic paired reports (40 cases)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import stats

from app.errors import ReportError
from app.eval.compare import compare_reports, comparison_markdown
from app.eval.stats import significance

N = 40


def judge_scores(seed: int) -> list[float]:
    """Means of three 1-5 judge samples, like a report's per-case judge values."""
    rng = random.Random(seed)
    return [round(sum(rng.randint(2, 5) for _ in range(3)) / 3, 4) for _ in range(N)]


def shifted(base: list[float], shift: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [round(b + shift + rng.choice([-1 / 3, 0.0, 1 / 3]), 4) for b in base]


def row(comparison, metric):  # type: ignore[no-untyped-def]
    return next(r for r in comparison.rows if r.metric == metric)


def test_known_positive_shift_is_better_with_scipy_p_value(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(1)
    new = shifted(base, +0.5, 2)
    cmp = compare_reports(make_report({"faithfulness": base}), make_report({"faithfulness": new}))
    r = row(cmp, "faithfulness")
    expected = stats.wilcoxon(new, base, zero_method="wilcox", alternative="two-sided").pvalue
    assert r.p_value == pytest.approx(float(expected), rel=1e-12)
    assert r.p_value < 1e-4
    assert r.verdict == "better" and r.symbol == "✅"
    assert r.delta == pytest.approx(float(np.mean(new) - np.mean(base)))
    assert r.n == N
    assert not cmp.has_regression


def test_known_negative_shift_is_a_regression(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(3)
    new = shifted(base, -0.4, 4)
    cmp = compare_reports(make_report({"correctness": base}), make_report({"correctness": new}))
    r = row(cmp, "correctness")
    expected = stats.wilcoxon(new, base, zero_method="wilcox").pvalue
    assert r.p_value == pytest.approx(float(expected), rel=1e-12)
    assert r.p_value < 0.05
    assert r.verdict == "regression" and r.symbol == "❌"
    assert r.ci95 is not None and r.ci95[1] < 0
    assert cmp.has_regression
    assert "| correctness |" in comparison_markdown(cmp) and "❌ significant regression" in (
        comparison_markdown(cmp)
    )


def test_noise_only_is_no_meaningful_change(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(5)
    rng = random.Random(6)
    new = list(base)
    for i in rng.sample(range(N), 6):  # three up, three down by one sample step
        new[i] = round(new[i] + (1 / 3 if i % 2 else -1 / 3), 4)
    cmp = compare_reports(make_report({"faithfulness": base}), make_report({"faithfulness": new}))
    r = row(cmp, "faithfulness")
    assert r.p_value == pytest.approx(float(stats.wilcoxon(new, base).pvalue), rel=1e-12)
    assert r.p_value > 0.05
    assert r.ci95 is not None and r.ci95[0] > -0.15 and r.ci95[1] < 0.15  # inside the margin
    assert r.verdict == "no_change" and r.symbol == "✅"


def test_pure_variance_change_is_flagged_with_unchanged_mean(make_report) -> None:  # type: ignore[no-untyped-def]
    small = [-0.2, -0.1, 0.1, 0.2]
    large = [-1.5, 1.5, -1.0, 1.0, 1.5, -1.5, 1.0, -1.0]
    base = [3.0 + small[i % 4] for i in range(N)]
    new = [3.0 + large[i % 8] for i in range(N)]
    cmp = compare_reports(make_report({"faithfulness": base}), make_report({"faithfulness": new}))
    r = row(cmp, "faithfulness")
    assert r.base_mean == pytest.approx(3.0) and r.new_mean == pytest.approx(3.0)
    assert r.delta == pytest.approx(0.0, abs=1e-12)
    assert r.p_value is not None and r.p_value > 0.05  # the mean did not move
    assert r.variance_p == pytest.approx(
        float(stats.levene(base, new, center="median").pvalue), rel=1e-12
    )
    assert r.variance_p < 0.001
    assert r.verdict == "review" and r.symbol == "⚠️"
    assert any("variance up" in reason for reason in r.reasons)
    assert not cmp.has_regression and cmp.needs_review


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(7)
    new = shifted(base, 0.3, 8)
    lo, hi = significance.bootstrap_ci(base, new)
    assert (lo, hi) == significance.bootstrap_ci(base, new)  # seeded: reproducible
    ref = stats.bootstrap(
        (np.array(new) - np.array(base),),
        np.mean,
        n_resamples=20000,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(123),
    ).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.03)
    assert hi == pytest.approx(ref.high, abs=0.03)
    assert lo < float(np.mean(new) - np.mean(base)) < hi


def test_binary_rate_uses_exact_mcnemar(make_report) -> None:  # type: ignore[no-untyped-def]
    base = [1.0] * 34 + [0.0] * 6
    new = list(base)
    for i in range(8):  # 8 cases lose a correct citation
        new[i] = 0.0
    new[35] = 1.0  # one case gains one
    cmp = compare_reports(
        make_report({"citation_accuracy": base}), make_report({"citation_accuracy": new})
    )
    r = row(cmp, "citation_accuracy")
    assert r.test == "mcnemar"
    assert r.discordant == (1, 8)
    assert r.p_value == pytest.approx(stats.binomtest(1, 9, 0.5).pvalue, rel=1e-12)
    assert r.p_value == pytest.approx(0.0390625)
    assert r.verdict == "regression"


def test_red_line_fails_on_a_single_leak_even_if_not_significant(make_report) -> None:  # type: ignore[no-untyped-def]
    base = [0.0] * N
    new = [0.0] * N
    new[17] = 1.0
    cmp = compare_reports(make_report({"acl_leak": base}), make_report({"acl_leak": new}))
    r = row(cmp, "acl_leak")
    assert r.p_value == 1.0  # McNemar cannot see one discordant pair
    assert r.verdict == "red_line" and r.symbol == "❌"
    assert "kb-018" in r.reasons[0]
    assert cmp.has_regression


def test_refusal_rate_up_needs_review(make_report) -> None:  # type: ignore[no-untyped-def]
    base = [1.0] * 5 + [0.0] * 35
    new = [1.0] * 7 + [0.0] * 33
    cmp = compare_reports(make_report({"refusal_rate": base}), make_report({"refusal_rate": new}))
    r = row(cmp, "refusal_rate")
    assert r.verdict == "review"
    md = comparison_markdown(cmp)
    line = next(x for x in md.splitlines() if x.startswith("| refusal_rate |"))
    assert line.startswith("| refusal_rate | 12.5% | 17.5% | +5.0 pp [")
    assert "(2↑ 0↓) | ⚠️ needs review" in line


def test_cases_pair_by_id_and_unpaired_are_listed(make_report) -> None:  # type: ignore[no-untyped-def]
    base_ids = [f"kb-{i:03d}" for i in range(1, 41)]
    new_ids = [*list(reversed(base_ids[2:])), "kb-900"]
    base_vals = [float(i % 5 + 1) for i in range(40)]
    by_id = dict(zip(base_ids, base_vals, strict=True))
    new_vals = [by_id.get(cid, 3.0) for cid in new_ids]  # same value per id: nothing changed
    cmp = compare_reports(
        make_report({"faithfulness": base_vals}, ids=base_ids),
        make_report({"faithfulness": new_vals}, ids=new_ids, tags=[["x"]] * len(new_ids)),
    )
    r = row(cmp, "faithfulness")
    assert cmp.paired == 38 and r.n == 38
    assert r.delta == pytest.approx(0.0) and r.p_value == 1.0
    assert cmp.unpaired_base == ("kb-001", "kb-002") and cmp.unpaired_new == ("kb-900",)
    assert "base only kb-001, kb-002, new only kb-900" in comparison_markdown(cmp)


def test_null_values_are_excluded_from_the_pairs(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(9)
    new: list[float | None] = list(shifted(base, 0.5, 10))
    new[0] = None
    new[1] = None
    cmp = compare_reports(make_report({"faithfulness": base}), make_report({"faithfulness": new}))
    r = row(cmp, "faithfulness")
    assert r.n == N - 2
    kept_b, kept_n = base[2:], new[2:]
    assert r.p_value == pytest.approx(float(stats.wilcoxon(kept_n, kept_b).pvalue), rel=1e-12)


def test_tag_regressions_listed_under_the_table(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(11)
    tags = [["finance"] if i < 20 else ["hr"] for i in range(N)]
    new = list(base[:20]) + [max(1.0, b - 1.0) for b in base[20:]]
    cmp = compare_reports(
        make_report({"faithfulness": base}, tags=tags),
        make_report({"faithfulness": new}, tags=tags),
    )
    assert [(t.tag, t.metric) for t in cmp.tag_regressions] == [("hr", "faithfulness")]
    hr = cmp.tag_regressions[0]
    assert hr.significant and hr.n == 20
    assert hr.p_value == pytest.approx(float(stats.wilcoxon(new[20:], base[20:]).pvalue))
    assert "Regressions by tag** (Benjamini–Hochberg q < α" in comparison_markdown(cmp)
    assert "| hr | faithfulness | 20 |" in comparison_markdown(cmp)


def test_ruler_mismatch_is_refused_naming_both_judges(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(12)
    a = make_report({"faithfulness": base}, judge="anthropic:claude-opus-4-7")
    b = make_report({"faithfulness": base}, judge="openai:gpt-4.1")
    with pytest.raises(ReportError) as exc:
        compare_reports(a, b)
    msg = str(exc.value)
    assert "anthropic:claude-opus-4-7" in msg and "openai:gpt-4.1" in msg
    assert "--allow-ruler-change" in msg

    allowed = compare_reports(a, b, allow_ruler_change=True)
    assert allowed.ruler_changed
    assert "ruler changed" in allowed.title
    assert "judge model: base anthropic:claude-opus-4-7 vs new openai:gpt-4.1" in (
        comparison_markdown(allowed)
    )


def test_judge_prompt_hash_and_dataset_version_are_rulers(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(13)
    moved = {
        "judge/faithfulness": {"version": "judge/faithfulness_v1", "hash": "sha256:changed"},
        "judge/correctness": {"version": "judge/correctness_v1", "hash": "sha256:bbb222"},
    }
    a = make_report({"faithfulness": base})
    with pytest.raises(ReportError, match=r"judge prompt judge/faithfulness: base"):
        compare_reports(a, make_report({"faithfulness": base}, judge_prompts=moved))
    with pytest.raises(ReportError, match=r"dataset smoke: base v1.0 .* vs new v1.1"):
        compare_reports(a, make_report({"faithfulness": base}, dataset_version="1.1"))


def test_offline_reports_are_labelled_offline_baseline(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(14)
    kw = {"candidate": "offline:extractive", "judge": "offline:reference-judge"}
    cmp = compare_reports(
        make_report({"faithfulness": base}, prompt_version="system/kb_qa_v1", **kw),
        make_report({"faithfulness": base}, prompt_version="system/kb_qa_v2", **kw),
    )
    assert cmp.offline
    assert cmp.title.startswith("Offline-baseline numbers")
    assert "system/kb_qa_v1" in cmp.title and "system/kb_qa_v2" in cmp.title
    online = compare_reports(
        make_report({"faithfulness": base}), make_report({"faithfulness": base})
    )
    assert not online.offline and "Offline" not in comparison_markdown(online)


def test_footnote_names_methods_and_alpha(make_report) -> None:  # type: ignore[no-untyped-def]
    base = judge_scores(15)
    md = comparison_markdown(
        compare_reports(make_report({"faithfulness": base}), make_report({"faithfulness": base}))
    )
    assert "Wilcoxon signed-rank" in md and "zero_method='wilcox'" in md
    assert "McNemar" in md and "Brown–Forsythe" in md and "α = 0.05" in md


def test_cost_metrics_are_reviewed_not_failed_and_empty_metrics_are_no_data(make_report) -> None:  # type: ignore[no-untyped-def]
    base = [300.0 + i for i in range(N)]
    new = [v + 150.0 for v in base]
    empty: list[float | None] = [None] * N
    cmp = compare_reports(
        make_report({"tokens": base, "rewrite_accuracy": empty}),
        make_report({"tokens": new, "rewrite_accuracy": empty}),
    )
    tokens = row(cmp, "tokens")
    assert tokens.p_value == pytest.approx(float(stats.wilcoxon(new, base).pvalue))
    assert tokens.verdict == "review" and "not a quality regression" in tokens.reasons[0]
    assert row(cmp, "rewrite_accuracy").verdict == "no_data"
    assert row(cmp, "rewrite_accuracy").symbol == "➖"
    assert not cmp.has_regression and cmp.tag_regressions == ()


def test_refusal_rate_is_derived_from_refused_flags(make_report) -> None:  # type: ignore[no-untyped-def]
    scores = judge_scores(16)
    base_ref = [i < 4 for i in range(N)]  # 10 %
    new_ref = [i < 7 for i in range(N)]  # 17.5 %: three more refusals
    cmp = compare_reports(
        make_report({"faithfulness": scores}, refused=base_ref),
        make_report({"faithfulness": scores}, refused=new_ref),
    )
    r = row(cmp, "refusal_rate")
    assert (r.base_mean, r.new_mean) == (pytest.approx(0.1), pytest.approx(0.175))
    assert r.discordant == (3, 0)
    assert r.p_value == pytest.approx(stats.binomtest(3, 3, 0.5).pvalue)
    assert r.verdict == "review" and r.reasons[0].startswith("refusal_rate up")
    same = compare_reports(
        make_report({"faithfulness": scores}, refused=base_ref),
        make_report({"faithfulness": scores}, refused=base_ref),
    )
    assert row(same, "refusal_rate").verdict == "no_change"


def test_degenerate_samples_give_defined_p_values_without_warnings() -> None:
    same = [3.0] * 10
    assert significance.wilcoxon_p(same, same) == 1.0
    assert significance.brown_forsythe_p(same, same) == 1.0
    assert significance.brown_forsythe_p([3.0] * 10, [2.0, 4.0] * 5) == 0.0  # spread from none
    assert significance.mcnemar_exact([0, 1], [0, 1]).p_value == 1.0
    with pytest.raises(ValueError, match="0/1"):
        significance.mcnemar_exact([0.5], [1])
    with pytest.raises(ValueError, match="length"):
        significance.wilcoxon_p([1.0], [1.0, 2.0])


def test_scipy_is_imported_lazily() -> None:
    import subprocess
    import sys

    code = "import sys, app.eval.compare, app.cli.eval_compare; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
