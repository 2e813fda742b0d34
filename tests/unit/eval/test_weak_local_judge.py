"""A local judge that answers in the schema, labelled weak, never gating.

Before: ``--judge local:smollm2`` judged 0 of 4 cases (replies cut or garbled, ``1.1.1.1…``):
nothing constrained the small model's output. Now every judge request carries the reply's
JSON Schema; the local tier sends it as ``response_format: json_schema`` (llm-server.mjs turns
it into a llama.cpp grammar: tests/e2e/test_local_model.py checks the real server), the
report labels the judge weak and its metrics' thresholds never set the run's status.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.eval.report.status import run_status
from app.eval.scoring.judges import JUDGE_REPLY_SCHEMA, check_judge, parse_judge, weak_judge
from app.llm.providers.families import parse_model as ref
from app.llm.providers.local import LocalProvider
from app.llm.providers.openai import OpenAIProvider
from app.llm.types import ChatRequest, Message
from tests.support.fake_llm_server import FakeLLMServer


def _request(schema: dict[str, Any] | None) -> ChatRequest:
    return ChatRequest(
        model="smollm2",
        system=None,
        messages=(Message("user", "score it"),),
        response_format="json",
        purpose="judge",
        json_schema=schema,
    )


def test_the_local_tier_sends_the_schema_and_a_hosted_openai_model_json_object() -> None:
    local = LocalProvider.payload(_request(JUDGE_REPLY_SCHEMA), model="smollm2", base_url=None)
    assert local["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "strict": True, "schema": JUDGE_REPLY_SCHEMA},
    }
    hosted = OpenAIProvider.payload(_request(JUDGE_REPLY_SCHEMA), model="gpt-4o", base_url=None)
    assert hosted["response_format"] == {"type": "json_object"}
    plain = LocalProvider.payload(_request(None), model="smollm2", base_url=None)
    assert plain["response_format"] == {"type": "json_object"}


def test_a_request_without_a_schema_keeps_its_cache_payload() -> None:
    assert "json_schema" not in _request(None).cache_payload()
    assert _request(JUDGE_REPLY_SCHEMA).cache_payload()["json_schema"] == JUDGE_REPLY_SCHEMA


@pytest.mark.parametrize("score", [1, 2, 3, 4, 5])
def test_every_reply_the_schema_admits_parses(score: int) -> None:
    # the grammar's output is JSON of exactly this shape: parse_judge must accept all of it
    reply = json.dumps({"score": score, "reasoning": "x" * 80}, ensure_ascii=False)
    assert parse_judge(reply) == (float(score), "x" * 80)
    assert JUDGE_REPLY_SCHEMA["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert list(JUDGE_REPLY_SCHEMA["properties"]) == ["score", "reasoning"]  # score first


def test_the_local_tier_is_a_weak_judge_and_a_hosted_stronger_one_is_not() -> None:
    assert weak_judge(ref("offline:extractive"), ref("local:smollm2")) is not None
    assert weak_judge(ref("anthropic:claude-sonnet-4-6"), ref("anthropic:claude-opus-4-7")) is None
    assert (
        weak_judge(ref("anthropic:claude-opus-4-7"), ref("anthropic:claude-haiku-4-5")) is not None
    )
    warnings = check_judge(ref("offline:extractive"), ref("local:smollm2"))
    assert any(w.startswith("WEAK JUDGE: local:smollm2") for w in warnings), warnings
    # one warning says what the local tier is: no "not in JUDGE_TIERS" beside it
    assert not any("JUDGE_TIERS" in w for w in warnings), warnings
    hosted = check_judge(ref("anthropic:claude-sonnet-4-6"), ref("local:smollm2"))
    assert not any("JUDGE_TIERS" in w for w in hosted), hosted


class _V:
    def __init__(self, verdict: str) -> None:
        self.verdict = verdict
        self.reason: str | None = None


def _status(weak: tuple[str, ...]) -> tuple[str, str]:
    verdicts = {"acl_leak": _V("pass"), "hit_at_k": _V("pass"), "faithfulness": _V("fail")}
    status = run_status(
        gate="thresholds",
        verdicts=verdicts,
        red_lines=["acl_leak"],
        partial_reason=None,
        cases_done=3,
        cases_planned=3,
        candidate_offline=False,
        judge_offline=False,
        weak_judge_metrics=weak,
    )
    return status.status, status.line


def test_a_weak_judge_s_failed_threshold_does_not_gate() -> None:
    assert _status(())[0] == "fail"  # a judge that is not weak gates
    word, line = _status(("faithfulness", "correctness"))
    assert word == "pass"
    assert "judge metrics not gated (weak judge: faithfulness)" in line
    assert "every threshold met (1 of 1)" in line


def _judge_reply(body: Any) -> str:
    if body.get("response_format", {}).get("type") == "json_schema":
        return '{"score": 1, "reasoning": "none of it is in the documents"}'
    return "According to the documents [1]."


def test_a_run_judged_by_the_local_tier_sends_the_schema_and_says_weak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    with FakeLLMServer(responder=_judge_reply) as server:
        monkeypatch.setenv("RAG_LOCAL_MODEL_URL", server.openai_base_url)
        result = CliRunner().invoke(
            cli,
            ["eval", "run", "--suite", "smoke", "--limit", "2", "--judge", "local:smollm2",
             "--judge-samples", "1", "--allow-unlisted-model", "--out", str(tmp_path), "--quiet"],
        )  # fmt: skip
        bodies = [r.body for r in server.received]
    assert result.exit_code in (0, 1), result.output
    assert bodies and all(
        b["response_format"]["json_schema"]["schema"] == JUDGE_REPLY_SCHEMA for b in bodies
    )
    (path,) = tmp_path.glob("eval_*.json")
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["meta"]["judge"]["weak"] is True
    assert report["verdicts"]["faithfulness"]["verdict"] == "fail"  # every score was 1
    md = next(tmp_path.glob("eval_*.md")).read_text(encoding="utf-8")
    assert "`local:smollm2` × 1 samples — WEAK JUDGE: its metrics never gate" in md
    line = report["status_line"]
    assert "judge metrics not gated (weak judge:" in line and "faithfulness" in line
    assert "faithfulness" not in line.split("judge metrics not gated")[0]
