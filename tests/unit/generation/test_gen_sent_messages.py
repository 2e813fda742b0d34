"""The trace keeps the answer call's messages exactly as sent (issue 16: "the prompt exactly
as sent"): compared with what a real OpenAI SDK put on the wire to a local server, cut at a
stated limit with the full text's sha256, and stored once per distinct text in a report."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.generation.pipeline.trace import SENT_MESSAGE_LIMIT, SentMessage, sent_messages
from app.llm.engine import Engine, EngineConfig
from app.llm.types import ChatRequest
from app.llm.types import Message as M
from tests.support.fake_llm_server import FakeLLMServer


async def test_the_trace_holds_what_the_server_received(
    kb_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-sent-messages")
    with FakeLLMServer(responder=lambda body: "年假可以结转 [1]。") as server:
        engine = Engine(EngineConfig(cache=False, timeout_s=10))
        try:
            config = PipelineConfig(
                model=f"openai:qwen2-7b@{server.openai_base_url}", kb_path=kb_path
            )
            answer = await Pipeline(config, engine).answer("年假可以结转吗？", [], ["public"])
        finally:
            await engine.aclose()
        bodies = [r.body for r in server.received if r.body.get("messages")]
    wire = bodies[-1]["messages"]  # the answer call is the last one
    sent = answer.trace.sent
    assert [(m.role, m.content) for m in sent] == [(w["role"], w["content"]) for w in wire]
    assert sent[0].role == "system" and "年假可以结转吗" in sent[-1].content  # type: ignore[operator]
    for m in sent:
        assert m.sha256 == hashlib.sha256(m.content.encode()).hexdigest()  # type: ignore[union-attr]
        assert m.chars == len(m.content) and m.cut == 0  # type: ignore[arg-type]


def test_a_long_message_is_cut_at_the_stated_limit_and_hashed_whole() -> None:
    text = "资" * (SENT_MESSAGE_LIMIT + 7)
    m = SentMessage.of("user", text)
    assert m.content == text[:SENT_MESSAGE_LIMIT] and m.cut == 7 and m.chars == len(text)
    assert m.sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_a_single_string_format_is_sent_as_one_user_message() -> None:
    chat = ChatRequest(model="m", system="S", messages=(M("user", "Q"),))
    assert [(m.role, m.content) for m in sent_messages(chat)] == [("system", "S"), ("user", "Q")]
    text = ChatRequest(
        model="m",
        system="S",
        messages=(M("user", "Q"),),
        chat_format="llama2",
        prompt_text="<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nQ [/INST]",
    )
    assert [(m.role, m.content) for m in sent_messages(text)] == [
        ("user", "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nQ [/INST]")
    ]
