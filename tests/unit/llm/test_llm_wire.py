"""One wire encoder per API: ``request_payload`` is byte-for-byte the body the SDK sends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.llm.engine import Engine
from app.llm.providers import request_payload
from app.llm.providers.families import parse_provider
from app.llm.types import ChatRequest, Message
from tests.support.fake_llm_server import FakeLLMServer

pytestmark = pytest.mark.usefixtures("planted_keys")

REQUESTS = [
    ChatRequest("m", "You are terse.", (Message("user", "capital?"),)),
    ChatRequest(
        "m",
        "sys",
        (Message("user", "a"), Message("assistant", "b"), Message("user", "c")),
        temperature=0.3,
        max_tokens=77,
        stop=("###",),
        response_format="json",
    ),
    ChatRequest(
        "m",
        "sys",
        (Message("user", "hi"),),
        chat_format="llama2",
        prompt_text="<s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nhi [/INST]",
    ),
    ChatRequest("m", None, (Message("user", "no system"),), metadata={"x": "y"}),
    ChatRequest("m", "plain", (Message("user", "q"),), metadata={"system_cache_control": "none"}),
]


def _providers(server: FakeLLMServer) -> list[str]:
    return [
        f"openai:gpt-4o-mini@{server.openai_base_url}",  # a custom base_url: max_tokens
        "anthropic:claude-sonnet-4-6",
    ]


@pytest.mark.parametrize("index", range(len(REQUESTS)))
async def test_payload_is_the_body_received(
    index: int,
    fake_llm_server: FakeLLMServer,
    engine_factory: Callable[..., Engine],
    planted_keys: dict[str, str],
) -> None:
    request = REQUESTS[index]
    engine = engine_factory(cache=False)
    for n, provider in enumerate(_providers(fake_llm_server)):
        await engine.generate(provider, request)
        received = fake_llm_server.received[n]
        assert received.body == request_payload(parse_provider(provider), request)
        for key in planted_keys.values():  # the key travels in a header, never in the body
            assert key not in str(received.body)


async def test_official_openai_endpoint_payload(
    fake_llm_server: FakeLLMServer,
    engine_factory: Callable[..., Engine],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm_server.openai_base_url)
    request = REQUESTS[1]
    await engine_factory(cache=False).generate("openai:gpt-4o", request)
    body = fake_llm_server.received[0].body
    assert body == request_payload(parse_provider("openai:gpt-4o"), request)
    assert body["max_completion_tokens"] == 77 and "max_tokens" not in body


def test_an_in_process_provider_payload_is_the_request_itself() -> None:
    request = REQUESTS[3]
    payload = request_payload(parse_provider("offline:extractive"), request)
    assert payload["model"] == "extractive"
    assert payload["messages"] == [["user", "no system"]] and payload["metadata"] == {"x": "y"}
