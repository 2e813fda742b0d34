"""``rag eval run`` through the real SDKs: the report says what the server answered.

The fake server answers every candidate request with an answer derived from the question
it finds in the prompt and every judge request with scripted JSON scores (per metric, per
sample). The report must be schema-valid, say the candidate is not offline, carry those
exact answers and scores, and account for every request the server served; a second
identical run is served entirely from the cache (0 new requests, the same results).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

PROVIDERS = {
    "openai": ("openai:gpt-4o-mini@{v1}", "openai:gpt-4o@{v1}"),
    "anthropic": ("anthropic:claude-sonnet-4-6", "anthropic:claude-opus-4-7"),
}
JUDGE_METRICS = ("faithfulness", "correctness", "relevance")


def _judge_entries(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The case's judge-scored metrics: those that carry samples."""
    return {n: m for n, m in case["metrics"].items() if m.get("samples") is not None}


def _results(report: dict[str, Any]) -> dict[str, Any]:
    return {
        c["id"]: (
            c["answer"],
            {n: (m["value"], m["samples"]) for n, m in _judge_entries(c).items()},
            {n: m["value"] for n, m in c["metrics"].items() if n not in ("latency_s", "cost_usd")},
        )
        for c in report["cases"]
    }


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_report_carries_what_the_server_answered_and_reruns_hit_the_cache(
    planted_keys: dict[str, str],
    scripted_llm: Any,
    rag: Any,
    kit: SimpleNamespace,
    provider: str,
) -> None:
    server = scripted_llm.server
    model, judge = (p.format(v1=server.openai_base_url) for p in PROVIDERS[provider])
    args = ["eval", "run", "--suite", "smoke", "--limit", "5", "--model", model]
    args += ["--judge", judge, "--quiet"]
    first = rag(*args, "--out", str(rag.out / "first"))
    assert first.returncode in (0, 1), first.stderr
    report = first.report()

    schema = json.loads((kit.repo / "reports/report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(report)  # raises with the path if not

    meta = report["meta"]
    assert meta["candidate"] == {"provider": model, "offline": False}
    assert meta["judge"]["provider"] == judge and meta["judge"]["offline"] is False
    assert meta["judge"]["samples"] == 3
    assert report["partial"] is False
    cases = report["cases"]
    assert [c["id"] for c in cases] == sorted(c["id"] for c in cases) and len(cases) == 5

    for case in cases:
        assert case["errors"] == [], case["errors"]
        # the model's own text, for this case's question (not another case's, not offline)
        assert case["trace"]["tokens"]["llm_calls"] >= 1, case["trace"]
        assert case["answer"] == kit.scripted_answer(case["question"]), case["id"]
        assert case["trace"]["model"] == model
        version = case["trace"]["prompt_version"]
        assert meta["prompts"]["system/kb_qa"]["version"] == version
        for metric in JUDGE_METRICS:
            scripted = kit.judge_script[metric]
            entry = case["metrics"][metric]
            assert sorted(entry["samples"]) == sorted(scripted), (case["id"], metric, entry)
            assert entry["value"] == pytest.approx(sum(scripted) / len(scripted), abs=1e-6)
            assert entry["reason"] is None

    # every request the server served is accounted for by the report: the candidate calls
    # each trace counts + one per judge sample (+ its repair, if any) of every judge metric
    answer_calls = sum(c["trace"]["tokens"]["llm_calls"] for c in cases)
    judge_calls = {
        name: sum(len(e["samples"]) + int(e["detail"].get("repaired", 0)) for e in entries)
        for name in {n for c in cases for n in _judge_entries(c)}
        for entries in [[_judge_entries(c)[name] for c in cases if name in _judge_entries(c)]]
    }
    assert set(judge_calls) >= set(JUDGE_METRICS)
    assert server.requests == answer_calls + sum(judge_calls.values())
    assert scripted_llm.answer_calls == answer_calls
    assert dict(scripted_llm.judge_calls) == {m: judge_calls[m] for m in JUDGE_METRICS}
    assert report["totals"]["engine"]["calls"] == server.requests
    assert report["totals"]["engine"]["cache_hits"] == 0

    # the same run again: everything from the cache, nothing new at the server
    served = server.requests
    second = rag(*args, "--out", str(rag.out / "second"))
    assert second.returncode == first.returncode, second.stderr
    again = second.report()
    assert server.requests == served, "a cached re-run reached the provider"
    assert again["totals"]["engine"]["calls"] == 0
    assert again["totals"]["engine"]["cache_hits"] == served
    assert again["run_id"] != report["run_id"]
    assert _results(again) == _results(report)


def test_multi_turn_rewrites_and_their_judging_are_accounted_and_cached(
    planted_keys: dict[str, str], scripted_llm: Any, rag: Any
) -> None:
    """The hard suite's multi-turn cases add query-rewrite calls (counted in each trace)
    and a rewrite-equivalence judge; the server's count must still equal the report's."""
    server = scripted_llm.server
    v1 = server.openai_base_url
    args = ["eval", "run", "--suite", "hard", "--limit", "3", "--quiet"]
    args += ["--model", f"openai:gpt-4o-mini@{v1}", "--judge", f"openai:gpt-4o@{v1}"]
    first = rag(*args, "--out", str(rag.out / "first"))
    assert first.returncode in (0, 1), first.stderr
    cases = first.report()["cases"]
    assert all(c["errors"] == [] for c in cases), [c["errors"] for c in cases]

    rewrites = [c for c in cases if c["trace"]["rewrite"]["called_llm"]]
    assert rewrites, "no multi-turn case called the rewrite model"
    assert scripted_llm.other_calls == len(rewrites)  # one rewrite call per such case
    assert scripted_llm.answer_calls == len(cases)
    assert sum(c["trace"]["tokens"]["llm_calls"] for c in cases) == len(cases) + len(rewrites)
    judged = [_judge_entries(c) for c in cases]
    assert any(len(j) > len(JUDGE_METRICS) for j in judged), "no rewrite-equivalence judge ran"
    judge_calls = sum(
        len(e["samples"]) + int(e["detail"].get("repaired", 0)) for j in judged for e in j.values()
    )
    assert sum(scripted_llm.judge_calls.values()) == judge_calls
    llm_calls = sum(c["trace"]["tokens"]["llm_calls"] for c in cases)
    assert server.requests == llm_calls + judge_calls

    served = server.requests
    second = rag(*args, "--out", str(rag.out / "second"))
    assert second.returncode == first.returncode, second.stderr
    assert server.requests == served, "a cached re-run reached the provider"
    assert _results(second.report()) == _results(first.report())
