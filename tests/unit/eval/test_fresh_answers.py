"""``--fresh-answers`` (the nightly's setting): the candidate is asked again although the
response cache (and the pipeline's warm cache of whole answers) holds yesterday's answers;
the judge's calls on unchanged requests are still hits.

Before: the nightly restored the response cache with actions/cache, so an unchanged night
replayed yesterday's answers and could not see a model or provider change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.cli import cli
from tests.support.fake_llm_server import FakeLLMServer


def _reply(body: Any) -> str:
    if body.get("response_format", {}).get("type") == "json_schema":
        return '{"score": 4, "reasoning": "supported"}'
    return "According to the documents, see [1]."


def test_fresh_answers_asks_the_candidate_again_and_keeps_the_judge_s_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))
    args = ["eval", "run", "--suite", "smoke", "--limit", "2", "--model", "local:smollm2",
            "--judge", "local:smollm2", "--allow-weak-judge", "--allow-unlisted-model",
            "--judge-samples", "1", "--metrics", "deterministic,relevance", "--quiet",
            "--gate", "red-lines"]  # fmt: skip

    def judge_calls(server: FakeLLMServer) -> int:
        return sum(r.body.get("response_format", {}).get("type") == "json_schema"
                   for r in server.received)  # fmt: skip

    with FakeLLMServer(responder=_reply) as server:
        monkeypatch.setenv("RAG_LOCAL_MODEL_URL", server.openai_base_url)
        first = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a")])
        assert first.exit_code in (0, 1), first.output
        answers, judged = len(server.received) - judge_calls(server), judge_calls(server)
        assert answers >= 2 and judged == 2
        again = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "b")])
        assert again.exit_code in (0, 1), again.output
        assert len(server.received) == answers + judged  # a plain rerun replays everything
        fresh = CliRunner().invoke(cli, [*args, "--fresh-answers", "--out", str(tmp_path / "c")])
        assert fresh.exit_code in (0, 1), fresh.output
        # the candidate was asked again; the same answers make the same judge requests: hits
        assert len(server.received) - judge_calls(server) == 2 * answers
        assert judge_calls(server) == judged
    (report,) = (tmp_path / "c").glob("eval_*.json")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["meta"]["config"]["fresh_answers"] is True
