"""`rag ops ab`: a rollout's arms compared on a simulated day of answer-log traffic."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.eval.compare.live import compare_arms
from app.ops.logs import read_answer_log

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import simulate_traffic  # noqa: E402

PID = "system/kb_qa"


@pytest.fixture
def rag(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    from app.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out = capsys.readouterr()
        return int(exc.value.code or 0), out.out, out.err

    return run


def _day(path: Path, *extra: str) -> Path:
    simulate_traffic.main(
        ["--out", str(path), "--users", "3000", "--candidate", "v3", "--percent", "50",
         "--seed", "11", *extra]
    )  # fmt: skip
    return path


def test_a_planted_worse_arm_is_flagged_and_an_equal_one_is_not(
    tmp_path: Path, rag: Callable[..., tuple[int, str, str]]
) -> None:
    worse = _day(tmp_path / "worse.jsonl", "--candidate-down-rate", "0.09",
                 "--candidate-latency-ms", "1500")  # fmt: skip
    code, out, err = rag("ops", "ab", str(worse), "--prompt", PID, "--trend")
    assert code == 1, (out, err)
    row = next(line for line in out.splitlines() if line.startswith("| 👎 rate"))
    assert "❌ significant regression" in row
    lat = next(line for line in out.splitlines() if line.startswith("| latency"))
    assert "⚠️ needs review" in lat and "a cost, not a quality regression" in lat
    assert out.count("| 2026-12-05T") == 24  # the hourly looks

    equal = _day(tmp_path / "equal.jsonl")
    code, out, err = rag("ops", "ab", str(equal), "--prompt", PID, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["regressions"] == [] and "mixture SPRT" in data["method"]
    verdicts = {m["metric"]: m["verdict"] for m in data["metrics"]}
    assert verdicts["thumbs_down_rate"] in ("no_change", "inconclusive"), verdicts
    arms = data["arms"]
    assert arms["candidate"]["versions"] == ["system/kb_qa_v3"]
    assert (
        0.4
        < arms["candidate"]["users"] / (arms["candidate"]["users"] + arms["control"]["users"])
        < 0.6
    )


def test_users_in_both_arms_are_paired(tmp_path: Path) -> None:
    """Arms chosen per session: 40 users answer in both arms (paired), 60 in one (unpaired);
    the estimate is the inverse-variance mix of the paired mean difference and the
    two-sample difference, computed here by hand."""
    rng = np.random.default_rng(3)
    lines: list[dict[str, Any]] = []
    truth: dict[str, dict[str, list[float]]] = {}
    for u in range(100):
        user = f"u{u}"
        arms = ["control", "candidate"] if u < 40 else [("control", "candidate")[u % 2]]
        for arm in arms:
            for k in range(3):
                latency = float(
                    1000 + 50 * u + (200 if arm == "candidate" else 0) + rng.normal(0, 30)
                )
                truth.setdefault(user, {}).setdefault(arm, []).append(latency)
                lines.append(
                    {
                        "event": "answer", "trace_id": f"{user}-{arm}-{k}", "model": "m",
                        "ts": f"2026-12-05T{k:02d}:{u % 60:02d}:00Z", "mode": "strict",
                        "question": "q", "latency_ms": latency, "user": user, "arm": arm,
                        "arms": {PID: {"arm": arm, "version": f"{PID}_v{3 if arm == 'candidate' else 2}"}},
                    }
                )  # fmt: skip
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    cmp = compare_arms(read_answer_log(path), PID)
    lat = next(m for m in cmp.metrics if m.metric == "latency_ms")
    assert (lat.paired_users, lat.unpaired_users) == (40, 60)
    means = {u: {a: float(np.mean(v)) for a, v in arms.items()} for u, arms in truth.items()}
    d = np.array([m["candidate"] - m["control"] for m in means.values() if len(m) == 2])
    a = np.array([m["control"] for m in means.values() if list(m) == ["control"]])
    b = np.array([m["candidate"] for m in means.values() if list(m) == ["candidate"]])
    est_p, var_p = d.mean(), d.var(ddof=1) / d.size
    est_u, var_u = b.mean() - a.mean(), a.var(ddof=1) / a.size + b.var(ddof=1) / b.size
    expected = (est_p / var_p + est_u / var_u) / (1 / var_p + 1 / var_u)
    assert lat.delta == pytest.approx(expected, rel=1e-9)
    # the spread between users cancels in the pairs: 200 ms is found although the users'
    # own latencies differ by up to 5 s
    assert lat.interval is not None and lat.interval[0] > 150 and lat.verdict == "review"


def test_bad_input_exits_2(tmp_path: Path, rag: Callable[..., tuple[int, str, str]]) -> None:
    day = _day(tmp_path / "d.jsonl", "--users", "50", "--hours", "1")
    code, _, err = rag("ops", "ab", str(day), "--prompt", "system/kb_strict")
    assert code == 2 and "no answer names an arm of system/kb_strict" in err
    assert "system/kb_qa" in err and "Traceback" not in err
    code, _, err = rag("ops", "ab", str(day), "--prompt", PID, "--since", "yesterday")
    assert code == 2 and "--since 'yesterday'" in err
    simulate_traffic.main(["--out", str(day), "--append", "--users", "50", "--hours", "1",
                           "--candidate", "v4", "--percent", "50"])  # fmt: skip
    code, _, err = rag("ops", "ab", str(day), "--prompt", PID)
    assert code == 2 and "system/kb_qa_v3, system/kb_qa_v4" in err and "--candidate" in err
    code, out, _ = rag("ops", "ab", str(day), "--prompt", PID, "--candidate", "system/kb_qa_v4")
    assert code in (0, 1) and "candidate system/kb_qa_v4 vs" in out
