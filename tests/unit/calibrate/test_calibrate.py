"""Judge calibration: the agreement statistics and the shipped labels with the offline judge."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats

from app.cli.judge import cli
from app.errors import DatasetError
from app.eval.scoring.calibrate import (
    ScoredRow,
    agreement,
    calibrate,
    load_labels,
    quadratic_weighted_kappa,
    round_half_up,
    verdict_for,
)

ROOT = Path(__file__).resolve().parents[3]
LABELS = ROOT / "tests" / "eval" / "calibration" / "labels_v1.0.jsonl"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))


def kappa_by_moments(a: list[int], b: list[int]) -> float:
    """Quadratic κ through its closed form (Schuster 2004): 2·s_xy / (s_x² + s_y² + (x̄−ȳ)²),
    population moments — an independent route to the same number."""
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sxy = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True)) / n
    sx = sum((x - ma) ** 2 for x in a) / n
    sy = sum((y - mb) ** 2 for y in b) / n
    return 2 * sxy / (sx + sy + (ma - mb) ** 2)


def test_kappa_perfect_and_reversed() -> None:
    assert quadratic_weighted_kappa([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == pytest.approx(1.0)
    # two raters who swap 1 and 5 on two items: observed = maximal disagreement
    assert quadratic_weighted_kappa([1, 5], [5, 1]) == pytest.approx(-1.0)
    assert quadratic_weighted_kappa([3, 3], [3, 3]) is None  # no variance at all: undefined


def test_kappa_hand_computed_example() -> None:
    # a = [1, 2, 3], b = [1, 3, 3]: weights (i-j)²/16. Observed disagreement: one pair (2,3)
    # with w = 1/16 → Σw·O = 1/48. Marginals a: 1/3 each on 1,2,3; b: 1/3 on 1, 2/3 on 3.
    # Σw·E = Σ_i Σ_j w_ij·p_i·q_j = (1/3)(1/3)·[w11 + w21 + w31] + (1/3)(2/3)·[w13 + w23 + w33]
    #      = (1/9)(0 + 1/16 + 4/16) + (2/9)(4/16 + 1/16 + 0) = (5/16)(1/9 + 2/9) = 5/48
    # κ = 1 - (1/48)/(5/48) = 0.8
    assert quadratic_weighted_kappa([1, 2, 3], [1, 3, 3]) == pytest.approx(0.8)
    assert kappa_by_moments([1, 2, 3], [1, 3, 3]) == pytest.approx(0.8)


def test_kappa_matches_the_closed_form_on_random_ratings() -> None:
    rng = random.Random(42)
    for _ in range(20):
        a = [rng.randint(1, 5) for _ in range(50)]
        b = [min(5, max(1, x + rng.choice([-2, -1, 0, 0, 1]))) for x in a]
        assert quadratic_weighted_kappa(a, b) == pytest.approx(kappa_by_moments(a, b), abs=1e-12)


def test_agreement_rates_spearman_and_errors() -> None:
    rows = [
        ScoredRow("a", "faithfulness", 5, 4.67, 5),
        ScoredRow("b", "faithfulness", 4, 3.0, 3),
        ScoredRow("c", "correctness", 1, 3.0, 3),
        ScoredRow("d", "correctness", 2, 2.33, 2),
        ScoredRow("e", "correctness", 3, None, None, "judge error: unparseable JSON"),
    ]
    a = agreement(rows)
    assert a.n == 5 and a.n_errors == 1
    assert a.exact == pytest.approx(2 / 5)  # a, d; the error counts as a disagreement
    assert a.within_one == pytest.approx(3 / 5)  # a, b, d
    human, judge = [5, 4, 1, 2], [4.67, 3.0, 3.0, 2.33]
    assert a.spearman == pytest.approx(float(stats.spearmanr(human, judge).statistic))
    assert a.kappa == pytest.approx(kappa_by_moments([5, 4, 1, 2], [5, 3, 3, 2]))


def test_round_half_up_and_verdict_bands() -> None:
    assert [round_half_up(x) for x in (1.0, 2.5, 3.49, 4.6667)] == [1, 3, 3, 5]
    assert verdict_for(0.86) == "pass"
    assert verdict_for(0.85) == "warn"
    assert verdict_for(0.75) == "warn"
    assert verdict_for(0.7499) == "fail"


def test_shipped_labels_are_well_formed() -> None:
    rows = load_labels(LABELS)
    assert len(rows) >= 40
    assert set(Counter(r.metric for r in rows)) == {"faithfulness", "correctness", "relevance"}
    assert set(Counter(r.human_score for r in rows)) == {1, 2, 3, 4, 5}
    kb = ROOT / "tests" / "eval" / "kb" / "sample"
    for r in rows:
        assert r.source is not None and (kb / r.source).is_file(), r.id


def test_shipped_labels_with_the_offline_judge() -> None:
    result = calibrate(LABELS, "offline:reference-judge", samples=1)
    rows = result.rows
    assert len(rows) == len(load_labels(LABELS)) and result.overall.n_errors == 0
    exact = sum(r.judge_score == r.human for r in rows) / len(rows)
    near = sum(abs((r.judge_score or 0) - r.human) <= 1 for r in rows) / len(rows)
    assert result.overall.exact == pytest.approx(exact)
    assert result.overall.within_one == pytest.approx(near)
    humans = [r.human for r in rows]
    judged = [r.judge_score or 0 for r in rows]
    assert result.overall.kappa == pytest.approx(kappa_by_moments(humans, judged))
    means = [r.judge_mean or 0.0 for r in rows]
    assert result.overall.spearman == pytest.approx(float(stats.spearmanr(humans, means).statistic))
    assert result.verdict == verdict_for(exact)
    # an honest baseline: it agrees with people in rank (ρ > 0.5) but not on the exact score
    assert result.overall.spearman is not None and result.overall.spearman > 0.5
    # the offline judge is deterministic: a wrong-number answer and a verbatim one differ
    by_id = {r.id: r for r in rows}
    assert by_id["cal-002"].judge_score == 5 and by_id["cal-002"].human == 5
    assert by_id["cal-044"].judge_score == 1 and by_id["cal-044"].human == 1  # "上限 50000 元"
    # a wrong number with overlapping words: the overlap judge is capped at 3, people say 1
    assert by_id["cal-003"].judge_score == 3 and by_id["cal-003"].human == 1


def test_cli_exit_code_follows_the_verdict(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--labels",
            str(LABELS),
            "--judge",
            "offline:reference-judge",
            "--samples",
            "1",
            "--json",
        ],
    )
    data = json.loads(res.output)
    assert res.exit_code == (1 if data["verdict"] == "fail" else 0)
    # a labels file the offline judge agrees with completely passes
    good = tmp_path / "good.jsonl"
    row = json.loads(LABELS.read_text(encoding="utf-8").splitlines()[1])  # verbatim answer, 5
    good.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    ok = CliRunner().invoke(
        cli, ["calibrate", "--labels", str(good), "--judge", "offline:reference-judge"]
    )
    assert ok.exit_code == 0, ok.output
    assert "verdict: PASS — exact agreement 100.0%" in ok.output


def test_bad_labels_name_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    row = json.loads(LABELS.read_text(encoding="utf-8").splitlines()[0])
    wrong = dict(row, human_score=7)
    typo = dict(row, id="x2", humann_score=3)
    bad.write_text(
        json.dumps(row) + "\n" + json.dumps(wrong) + "\n" + json.dumps(typo) + "\n{oops\n",
        encoding="utf-8",
    )
    with pytest.raises(DatasetError) as exc:
        load_labels(bad)
    msg = str(exc.value)
    assert f"{bad}:2: field human_score" in msg
    assert f"{bad}:3: field humann_score" in msg
    assert f"{bad}:4: not valid JSON" in msg


def test_weighted_kappa_equals_scikit_learn_on_random_ratings() -> None:
    """The κ `rag judge calibrate` reports is scikit-learn's (an independent implementation)
    with quadratic weights over the five categories."""
    from sklearn.metrics import cohen_kappa_score

    rng = random.Random(7)
    for n in (2, 5, 20, 50, 200):
        for _ in range(20):
            a = [rng.randint(1, 5) for _ in range(n)]
            b = [min(5, max(1, x + rng.choice((-2, -1, 0, 0, 1)))) for x in a]
            if len(set(a) | set(b)) == 1:
                continue
            ours = quadratic_weighted_kappa(a, b)
            theirs = cohen_kappa_score(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5])
            assert ours == pytest.approx(theirs, abs=1e-12)


def test_every_judge_prompt_must_pass_on_its_own() -> None:
    """Seed 004 §10.2 per judge prompt: a prompt below 75 % fails the run even when the
    overall agreement passes."""
    from app.eval.scoring.calibrate import ScoredRow, summarise

    good = [ScoredRow(f"g{i}", "faithfulness", 5, 5.0, 5) for i in range(18)]
    bad = [ScoredRow(f"b{i}", "relevance", 5, 2.0, 2) for i in range(2)]
    result = summarise(
        good + bad, judge="j", labels="l", samples=1, prompts={"relevance": "judge/relevance_v1"}
    )
    assert result.overall.exact == pytest.approx(0.9)  # overall it would pass
    assert result.per_prompt == {
        "faithfulness": ("judge/faithfulness", "pass"),
        "relevance": ("judge/relevance_v1", "fail"),
    }
    assert result.verdict == "fail"
    assert "judge/relevance_v1: FAIL (exact 0.0%) — revise the judge prompt" in result.to_text()
