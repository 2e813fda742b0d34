"""The offline baseline and a model take the same rewrite and summary path: the same rendered
prompts, sent through the same engine (with its cache), recorded the same way in the trace.
The model here is the real OpenAI SDK talking to a local fake server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.llm.engine import Engine, EngineConfig
from app.llm.spec import ModelRef
from app.llm.types import ChatRequest, Completion
from app.llm.types import Message as M
from tests.support.fake_llm_server import FakeLLMServer

HISTORY = [
    m
    for i in range(4)
    for m in (M("user", f"第{i}个问题：年假制度是怎样的？"), M("assistant", "员工年假为每年五天。"))
]


class RecordingEngine(Engine):
    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config)
        self.seen: list[tuple[ModelRef | str, ChatRequest, Completion]] = []

    async def generate(
        self, provider: ModelRef | str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        completion = await super().generate(provider, request, sample_index)
        self.seen.append((provider, request, completion))
        return completion


def _model_reply(body: Any) -> str:
    if body.get("response_format") == {"type": "json_object"}:  # rewrite/standalone
        return json.dumps({"original": "它可以结转吗？", "rewritten": "年假可以结转吗？"})
    if "新的摘要:" in body["messages"][-1]["content"]:  # summary/summarize_zh
        return "用户问年假制度，答五天"
    return "年假可以结转 [1]。"


async def _answer(model: str, kb_path: Path, cache: bool) -> tuple[Any, RecordingEngine]:
    engine = RecordingEngine(EngineConfig(cache=cache, timeout_s=10))
    try:
        pipe = Pipeline(PipelineConfig(model=model, kb_path=kb_path, max_tokens=530), engine)
        answer = await pipe.answer("它可以结转吗？", HISTORY, ["public"])
    finally:
        await engine.aclose()
    return answer, engine


async def test_offline_and_model_send_the_same_rewrite_and_summary_requests(
    kb_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-model-path")
    offline, off_engine = await _answer("offline:extractive", kb_path, cache=False)
    with FakeLLMServer(responder=_model_reply) as server:
        model = f"openai:qwen2-7b@{server.openai_base_url}"
        online, on_engine = await _answer(model, kb_path, cache=True)
        sent = server.requests
        again, again_engine = await _answer(model, kb_path, cache=True)  # a new pipeline
        assert server.requests == sent  # every call of the second run came from the cache
    assert all(c.cached for _, _, c in again_engine.seen)
    assert again.text == online.text and again.trace.tokens.cached_calls == len(again_engine.seen)

    def purposes(engine: RecordingEngine) -> list[str]:
        return [r.purpose for _, r, _ in engine.seen]

    assert purposes(off_engine) == purposes(on_engine) == purposes(again_engine)
    assert purposes(off_engine).count("rewrite") == 1
    assert purposes(off_engine).count("summary") >= 1
    for (_, off_req, off_c), (_, on_req, _) in zip(off_engine.seen, on_engine.seen, strict=True):
        if off_req.purpose in ("rewrite", "summary"):
            assert off_req.prompt_version == on_req.prompt_version
            assert off_req.metadata == on_req.metadata  # the conversation, for any model
            assert off_c.request_id and off_c.request_id.startswith(
                "baseline-rewriter-" if off_req.purpose == "rewrite" else "baseline-summariser-"
            )
    assert offline.trace.prompt_versions.keys() == online.trace.prompt_versions.keys()
    assert offline.trace.prompt_versions["rewrite"] == online.trace.prompt_versions["rewrite"]
    assert offline.trace.rewrite.called_llm and online.trace.rewrite.called_llm
    assert offline.trace.rewrite.strategy == online.trace.rewrite.strategy == "standalone"
    assert offline.trace.tokens.llm_calls == online.trace.tokens.llm_calls == len(off_engine.seen)
    assert online.trace.rewritten_query == "年假可以结转吗？"
    assert (
        online.trace.memory is not None and online.trace.memory.summary == "用户问年假制度，答五天"
    )
    assert offline.trace.memory is not None and offline.trace.memory.summary  # the baseline's line
    assert online.trace.prompt_versions["summary"] == "summary/summarize_zh_v1"
