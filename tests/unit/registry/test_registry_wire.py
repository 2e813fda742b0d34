"""`rag prompts render --json` prints exactly the body the provider sends.

For each API the JSON the command prints is compared with the body a real HTTP server
(tests/support/fake_llm_server.py, on 127.0.0.1) receives from the real SDK when the engine
sends the same prompt, variables, history and sampling parameters.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from app.generation.registry import render
from app.llm.engine import Engine, EngineConfig
from app.llm.types import Message
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.registry import wire

Rag = Callable[..., object]
KEYS = {"OPENAI_API_KEY": "sk-PLANTED-wire-openai-0123", "ANTHROPIC_API_KEY": "sk-ant-PLANTED-wire"}
HISTORY = [
    {"role": "user", "content": "年假几天？"},
    {"role": "assistant", "content": "五天 [1]。"},
]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeLLMServer]:
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    with FakeLLMServer() as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)  # for openai:<model>
        yield fake


@pytest.mark.parametrize(
    ("model_of", "prompt", "variables"),
    [
        (  # Anthropic Messages API: cacheable system block, max_tokens, no temperature
            lambda s: "anthropic:claude-sonnet-4-6",
            "system/kb_qa",
            {"question": "可以结转吗？", "context": "[1] 年假可结转到次年三月。"},
        ),
        (  # OpenAI at the official endpoint: max_completion_tokens
            lambda s: "openai:gpt-4o",
            "system/kb_qa",
            {"question": "可以结转吗？", "context": "[1] 年假可结转到次年三月。"},
        ),
        (  # an OpenAI-compatible server: max_tokens; a JSON-format prompt: response_format
            lambda s: f"openai:qwen2-7b@{s.openai_base_url}",
            "rewrite/standalone",
            {"history": "[倒数第1轮] 用户: 年假几天？", "question": "它能结转吗？"},
        ),
        (  # a Llama-2 chat string sent as one user message
            lambda s: f"openai:llama-2-13b-chat@{s.openai_base_url}",
            "system/retrieval_qa_en",
            {"question": "hi", "context": "c", "chat_history": ""},
        ),
    ],
)
async def test_render_json_is_the_body_sent(
    server: FakeLLMServer,
    rag: Rag,
    tmp_path: Path,
    model_of: Callable[[FakeLLMServer], str],
    prompt: str,
    variables: dict[str, str],
) -> None:
    model = model_of(server)
    history = HISTORY if prompt == "system/kb_qa" else []
    hist = tmp_path / "history.json"
    hist.write_text(json.dumps(history, ensure_ascii=False), encoding="utf-8")
    args = ["prompts", "render", prompt, "--model", model, "--history", str(hist)]
    for k, v in variables.items():
        args += ["--var", f"{k}={v}"]
    result = rag(*args, "--temperature", "0.2", "--max-tokens", "300", "--json")
    assert result.code == 0, result.err  # type: ignore[attr-defined]
    printed = json.loads(result.out)  # type: ignore[attr-defined]

    rp = render(prompt, model=model, variables=variables, history=history)
    async with Engine(EngineConfig(cache=False, timeout_s=10)) as engine:
        await engine.generate(model, rp.to_request(temperature=0.2, max_tokens=300))
    assert len(server.received) == 1
    received = server.received[0]
    assert printed["request"] == received.body
    assert printed["model"] == received.body["model"] == rp.model
    for key in KEYS.values():  # the key goes in a header the SDK adds, never in the JSON
        assert key not in result.out  # type: ignore[attr-defined]
    sent_key = KEYS["ANTHROPIC_API_KEY" if model.startswith("anthropic") else "OPENAI_API_KEY"]
    assert sent_key in " ".join(received.headers.values())
    assert "authorization" not in result.out.lower() and "x-api-key" not in result.out  # type: ignore[attr-defined]


def test_each_api_encodes_the_system_prompt_its_way(server: FakeLLMServer) -> None:
    variables = {"question": "q", "context": "c"}
    anthropic = render("system/kb_qa", model="anthropic:claude-sonnet-4-6", variables=variables)
    assert wire(anthropic)["system"] == [
        {"type": "text", "text": anthropic.system, "cache_control": {"type": "ephemeral"}}
    ]
    assert wire(anthropic)["max_tokens"] == 2048 and "temperature" not in wire(anthropic)
    openai = render("system/kb_qa", model="openai:gpt-4o", variables=variables)
    assert wire(openai)["messages"][0] == {"role": "system", "content": openai.system}
    assert wire(openai)["max_completion_tokens"] == 2048
    assert wire(openai)["messages"][1:] == [
        {"role": m.role, "content": m.content} for m in openai.messages
    ]
    assert openai.messages == (Message("user", openai.messages[0].content),)
