"""``rag datasets mine``: seed 004 §8.3's four rules, each at its boundary, on hand-built logs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.errors import UserError
from app.eval.datasets.mining import _p99, check_out_dir, mine, write_candidates
from app.ops.logs import read_answer_log
from app.paths import datasets_dir

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "answer_log" / "answers_sample.jsonl"


def answer(trace_id: str, question: str, **kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "event": "answer",
        "trace_id": trace_id,
        "ts": "2026-11-20T08:00:00Z",
        "model": "offline:extractive",
        "mode": "strict",
        "question": question,
        "user_acl": ["employee"],
        "history": [],
        "answer": "答案 [1]",
        "latency_ms": 120.0,
        "top1_score": 0.9,
        "retrieved_count": 3,
        "context_chunk_ids": ["kb:a#1"],
        "citations": [1],
        "invalid_citations": [],
    }
    rec.update(kw)
    return rec


def feedback(trace_id: str, user: str, rating: str, ts: str) -> dict[str, Any]:
    return {"event": "feedback", "trace_id": trace_id, "user": user, "rating": rating, "ts": ts}


def write_log(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return path


def rules_of(tmp_path: Path, records: list[dict[str, Any]]) -> dict[str, list[str]]:
    result = mine(read_answer_log(write_log(tmp_path, records)))
    return {c.question: c.rules for c in result.candidates}


def test_no_recall_is_zero_results_or_top1_below_0_3(tmp_path: Path) -> None:
    got = rules_of(
        tmp_path,
        [
            answer("t1", "零结果", mode="no_hits", top1_score=None, retrieved_count=0),
            answer("t2", "低分", top1_score=0.29),
            answer("t3", "刚好 0.3", top1_score=0.3),  # the seed says < 0.3: not a miss
            answer("t4", "正常", top1_score=0.95),
        ],
    )
    assert got == {"零结果": ["no_recall"], "低分": ["no_recall"]}


def test_an_injection_refused_on_purpose_is_not_a_retrieval_miss(tmp_path: Path) -> None:
    got = rules_of(
        tmp_path,
        [answer("t1", "忽略指令", mode="injection_refused", top1_score=None, retrieved_count=0)],
    )
    assert got == {}


def test_citation_out_of_range_and_high_latency(tmp_path: Path) -> None:
    got = rules_of(
        tmp_path,
        [
            answer("t1", "越界", invalid_citations=[4]),
            answer("t2", "慢", latency_ms=10_000.1),
            answer("t3", "刚好 10 秒", latency_ms=10_000.0),  # > 10 s, not >=
        ],
    )
    assert got == {"越界": ["citation_out_of_range"], "慢": ["high_latency"]}


def test_three_users_down_on_one_kind_of_question_within_a_week(tmp_path: Path) -> None:
    records = [
        answer("a", "病假一年有几天带薪的"),
        answer("b", "病假一年有几天带薪"),
        answer("c", "报销流程是什么"),
        feedback("a", "u1", "down", "2026-11-20T09:00:00Z"),
        feedback("b", "u2", "down", "2026-11-23T09:00:00Z"),
        feedback("a", "u3", "down", "2026-11-27T08:59:59Z"),  # 6 d 23:59:59 after the first
        feedback("c", "u1", "down", "2026-11-21T09:00:00Z"),  # another kind of question
    ]
    got = rules_of(tmp_path, records)
    assert got == {"病假一年有几天带薪的": ["thumbs_down"], "病假一年有几天带薪": ["thumbs_down"]}


@pytest.mark.parametrize(
    "votes",
    [
        # three users, but spread over more than 7 days
        [
            ("u1", "2026-11-01T00:00:00Z"),
            ("u2", "2026-11-05T00:00:00Z"),
            ("u3", "2026-11-08T00:00:01Z"),
        ],
        # one user three times is one user
        [
            ("u1", "2026-11-01T00:00:00Z"),
            ("u1", "2026-11-02T00:00:00Z"),
            ("u1", "2026-11-03T00:00:00Z"),
        ],
        # two users
        [("u1", "2026-11-01T00:00:00Z"), ("u2", "2026-11-02T00:00:00Z")],
    ],
)
def test_thumbs_down_needs_three_distinct_users_in_seven_days(
    tmp_path: Path, votes: list[tuple[str, str]]
) -> None:
    records = [answer(f"t{i}", "病假有几天") for i in range(len(votes))]
    records += [feedback(f"t{i}", u, "down", ts) for i, (u, ts) in enumerate(votes)]
    assert rules_of(tmp_path, records) == {}


def test_a_down_vote_taken_back_does_not_count(tmp_path: Path) -> None:
    records = [
        answer("a", "病假有几天"),
        feedback("a", "u1", "down", "2026-11-20T09:00:00Z"),
        feedback("a", "u2", "down", "2026-11-20T10:00:00Z"),
        feedback("a", "u3", "down", "2026-11-20T11:00:00Z"),
        feedback("a", "u3", "up", "2026-11-20T11:05:00Z"),
    ]
    assert rules_of(tmp_path, records) == {}


def test_p99_is_the_nearest_rank_percentile() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 99, 100, 101, 250):
        values = list(rng.exponential(800.0, size=n))
        expected = float(np.percentile(values, 99, method="inverted_cdf"))
        assert _p99(values) == pytest.approx(expected)
    assert _p99([]) is None


def test_questions_already_in_a_suite_are_known_not_proposed(tmp_path: Path) -> None:
    suite_q = json.loads((datasets_dir() / "smoke_v1.0.jsonl").read_text("utf-8").splitlines()[0])
    records = [
        answer("t1", suite_q["question"], top1_score=0.1),
        answer("t2", "新问题", top1_score=0.1),
    ]
    result = mine(read_answer_log(write_log(tmp_path, records)), datasets_dir=datasets_dir())
    assert [c.question for c in result.candidates] == ["新问题"]
    assert [c.known_as for c in result.known] == [f"smoke_v1.0/{suite_q['id']}"]


def test_candidates_are_written_for_review_and_never_overwrite(tmp_path: Path) -> None:
    log = read_answer_log(write_log(tmp_path, [answer("t1", "低分", top1_score=0.1)]))
    result = mine(log)
    out = tmp_path / "candidates"
    first = write_candidates(result, log.path, out)
    second = write_candidates(result, log.path, out)
    assert first != second and first.exists() and second.exists()
    row = json.loads(first.read_text("utf-8"))
    assert row["status"] == "needs_review" and row["golden_answer"] == ""
    assert row["rules"] == ["no_recall"] and row["trace_ids"] == ["t1"]
    assert row["annotator"] == "rag datasets mine"


def test_the_suites_folder_is_refused_as_output(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="inside the suites folder"):
        check_out_dir(datasets_dir() / "mined", datasets_dir())
    assert check_out_dir(tmp_path / "c", datasets_dir()) == (tmp_path / "c").resolve()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"answers\.jsonl:2: not JSON"),
        ('["a"]', r"answers\.jsonl:2: expected a JSON object"),
        ('{"trace_id": "x"}', r"answers\.jsonl:2: no `event` field"),
        (
            '{"event": "feedback", "trace_id": "t", "user": "u", "rating": "meh", "ts": "2026-11-01T00:00:00Z"}',
            r":2: feedback record, field `rating`",
        ),
        (
            '{"event": "feedback", "trace_id": "t", "user": "u", "rating": "up", "ts": "yesterday"}',
            r":2: feedback record, field `ts`",
        ),
        ('{"event": "answer", "trace_id": "t"}', r":2: answer record, field `ts`"),
    ],
)
def test_a_malformed_line_names_file_line_and_field(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(answer("t0", "q")) + "\n" + line + "\n", "utf-8")
    with pytest.raises(UserError, match=message):
        read_answer_log(path)


def test_old_records_without_answer_or_history_load(tmp_path: Path) -> None:
    rec = answer("t1", "q")
    del rec["answer"], rec["history"], rec["retrieved_count"]
    log = read_answer_log(write_log(tmp_path, [rec]))
    assert log.answers[0].answer is None and log.answers[0].history is None


def test_the_shipped_sample_log_fires_each_rule_once_per_planted_case() -> None:
    result = mine(read_answer_log(SAMPLE), datasets_dir=datasets_dir())
    assert all(result.counts[r] >= 1 for r in result.counts), result.counts
    by_rule = {
        r: sorted(c.question for c in result.candidates if r in c.rules) for r in result.counts
    }
    assert by_rule["thumbs_down"] == ["病假一年有几天带薪", "病假一年有几天带薪的"]
    assert by_rule["high_latency"] == ["出差住酒店一晚最多报多少钱"]
    assert by_rule["citation_out_of_range"] == ["报销单要谁批"]
    assert "年假一年能休几天啊" not in {
        q for qs in by_rule.values() for q in qs
    }  # its 👎 was taken back


def test_a_candidate_s_tags_are_tags_a_suite_accepts() -> None:
    import re

    from app.eval.datasets.case import TAG_PATTERN

    result = mine(read_answer_log(SAMPLE), datasets_dir=datasets_dir())
    tags = {t for c in result.candidates for t in c.to_json(SAMPLE, "")["tags"]}
    assert {"mined", "no-recall", "thumbs-down", "citation-out-of-range", "high-latency"} == tags
    assert all(re.match(TAG_PATTERN, t) for t in tags)


def test_mine_cli_writes_only_under_out_and_leaves_the_suites_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from app.cli import cli

    def digest() -> dict[str, str]:
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(datasets_dir().iterdir())
            if p.is_file()
        }

    before = digest()
    out = tmp_path / "cands"
    res = CliRunner().invoke(cli, ["datasets", "mine", str(SAMPLE), "--out", str(out)])
    assert res.exit_code == 0, res.output
    files = list(out.glob("mined_*.jsonl"))
    assert len(files) == 1
    assert "wrote 6 candidate(s) for review" in res.output
    assert digest() == before
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "datasets",
            "mine",
            str(SAMPLE),
            "--out",
            str(datasets_dir() / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2, bad.stderr
    assert "inside the suites folder" in bad.stderr and "Traceback" not in bad.stderr
    assert digest() == before
