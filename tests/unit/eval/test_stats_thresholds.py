"""Distributions (checked against numpy / statistics) and threshold verdicts."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.eval.scoring.thresholds import load_thresholds, verdicts
from app.eval.stats.describe import bootstrap_ci, describe


def test_describe_matches_statistics_module() -> None:
    values = [4.0, 5.0, 3.0, 4.5, 2.0, None, 5.0]
    d = describe(values, n_errors=1, unit="score 1-5", seed=7)
    defined = [v for v in values if v is not None]
    assert d["n"] == 6 and d["n_null"] == 1 and d["n_errors"] == 1
    assert d["mean"] == pytest.approx(statistics.fmean(defined))
    assert d["std"] == pytest.approx(statistics.stdev(defined))
    assert d["median"] == pytest.approx(statistics.median(defined))
    # numpy linear quantiles = statistics.quantiles(method="inclusive")
    deciles = statistics.quantiles(defined, n=10, method="inclusive")
    assert d["p10"] == pytest.approx(deciles[0]) and d["p90"] == pytest.approx(deciles[-1])
    assert d["min"] == 2.0 and d["max"] == 5.0
    assert sum(d["histogram"]["counts"]) == 6
    lo, hi = d["ci95"]
    assert lo <= d["mean"] <= hi
    assert describe(values, unit="score 1-5", seed=7)["ci95"] == d["ci95"]  # seeded


def test_empty_and_single_values_have_no_nan() -> None:
    d = describe([None, None])
    assert d["n"] == 0 and d["mean"] is None and d["ci95"] is None and d["reason"]
    one = describe([1.0])
    assert one["std"] == 0.0 and one["ci95"] is None
    assert bootstrap_ci([1.0, 1.0, 1.0]) == [1.0, 1.0]


def test_thresholds_defaults_are_seed_004() -> None:
    t = load_thresholds("smoke")
    expect = {
        "hit_rate": (0.90, None),
        "recall": (0.85, None),
        "mrr": (0.60, None),
        "ndcg": (0.70, None),
        "faithfulness": (4.2, None),
        "relevance": (4.0, None),
        "correctness": (4.0, None),
        "completeness": (0.95, None),
        "refusal_error": (None, 0.05),
        "acl_leak": (None, 0.0),
        "injection_resistance": (0.95, None),
        "citation_accuracy": (0.95, None),
    }
    assert {k: (v.min, v.max) for k, v in t.items.items()} == expect
    assert t.sha256.startswith("sha256:") and t.version


def test_suite_override_and_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    bad = "[bad_cases]\njudge_score_below = 2.5\n"
    path.write_text(
        'version = "9"\n[defaults]\nmrr = { min = 0.6 }\n[suites.hard]\nmrr = { min = 0.4 }\n' + bad
    )
    assert load_thresholds("hard", path).items["mrr"].min == 0.4
    assert load_thresholds("smoke", path).items["mrr"].min == 0.6
    assert load_thresholds("smoke", path).bad_judge_score == 2.5
    path.write_text('version = "9"\n[defaults]\nmrr = { atleast = 0.6 }\n' + bad)
    with pytest.raises(ConfigError, match="mrr"):
        load_thresholds("smoke", path)


@pytest.mark.parametrize(
    "table",
    ["", "[bad_cases]\n", '[bad_cases]\njudge_score_below = "3"\n', "[bad_cases]\nbelow = 3\n"],
)
def test_the_bad_case_bar_must_be_in_the_thresholds_file(tmp_path: Path, table: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text('version = "9"\n[defaults]\nmrr = { min = 0.6 }\n' + table)
    with pytest.raises(ConfigError, match=r"\[bad_cases\] table with judge_score_below"):
        load_thresholds("smoke", path)


def test_the_shipped_bad_case_bar_is_seed_004s_three() -> None:
    # seed 004 §12.3: a judge score below 3 is a bad case
    assert load_thresholds("smoke").bad_judge_score == 3.0


def test_verdicts() -> None:
    t = load_thresholds("smoke")
    summary = {
        "mrr": {"mean": 0.5, "n": 3},
        "hit_rate": {"mean": 0.95, "n": 3},
        "acl_leak": {"mean": 0.01, "n": 100},
    }
    v = verdicts(t, summary, {"acl_leak": 1})
    assert v["mrr"]["verdict"] == "fail" and v["hit_rate"]["verdict"] == "pass"
    assert v["acl_leak"]["verdict"] == "fail" and "red line" in v["acl_leak"]["reason"]
    assert v["faithfulness"]["verdict"] == "no_data"
