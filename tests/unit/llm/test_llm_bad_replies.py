"""Every 200 reply that is not a usable completion is a typed, retried ProviderError.

Issue 12: one ``200`` whose body was an HTML page, or whose ``message`` was ``null``, crashed
a whole run with an ``AttributeError`` from the OpenAI provider. Here each such body, for
both SDK providers, must become a :class:`ProviderError` for that call (with provider,
request id and what was wrong), be retried as transient, and never escape as anything else.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.errors import ProviderError
from app.llm.engine import Engine
from tests.support.fake_llm_server import BAD_BODIES, FakeLLMServer, bad_body, raw
from tests.unit.llm.helpers import chat

pytestmark = pytest.mark.usefixtures("planted_keys")

EngineFactory = Callable[..., Engine]
PROVIDERS = ["openai", "anthropic"]


def provider_for(kind: str, server: FakeLLMServer) -> str:
    if kind == "openai":
        return f"openai:gpt-4o-mini@{server.openai_base_url}"
    return "anthropic:claude-sonnet-4-6"


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("name", sorted(BAD_BODIES))
async def test_bad_body_is_a_provider_error_for_that_call(
    kind: str, name: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(bad_body(name))
    engine = engine_factory(cache=True, max_attempts=1)
    provider = provider_for(kind, fake_llm_server)
    with pytest.raises(ProviderError) as info:
        await engine.generate(provider, chat())
    err = info.value
    assert err.provider == provider
    assert err.request_id == "req_1" and "req_1" in str(err)
    assert err.retryable, f"{name}: a garbled 200 is transient and must be retryable"
    assert err.status == 200
    assert engine.stats.errors == 1
    # the error was not cached: the same call goes to the server again and succeeds
    completion = await engine.generate(provider, chat())
    assert completion.text == "echo: hello"
    assert fake_llm_server.requests == 2


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("name", ["html", "null_message", "cut_json", "empty"])
async def test_bad_body_is_retried_and_the_call_succeeds(
    kind: str, name: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(bad_body(name), "recovered")
    engine = engine_factory(cache=False)
    completion = await engine.generate(provider_for(kind, fake_llm_server), chat())
    assert completion.text == "recovered"
    assert engine.stats.retries == 1 and engine.stats.errors == 0
    assert fake_llm_server.requests == 2


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("html", ["text/html", "not JSON"]),
        ("html_as_json", ["not JSON", "<html>"]),
        ("empty", ["empty body"]),
        ("cut_json", ["not JSON"]),
        ("not_an_object", ["not a JSON object"]),
        ("no_choices", ["no choices"]),
        ("null_choices", ["no choices"]),
        ("null_message", ["message is null"]),
        ("null_content", ["no text content"]),
        ("wrong_content_type", ["text/plain"]),
        ("error_object", ["upstream overloaded"]),
    ],
)
async def test_openai_error_says_what_was_wrong(
    name: str, words: list[str], fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(bad_body(name))
    with pytest.raises(ProviderError) as info:
        await engine_factory(cache=False, max_attempts=1).generate(
            provider_for("openai", fake_llm_server), chat()
        )
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("no_choices", ["no text content"]),
        ("null_message", ["text block is not a string"]),
        ("error_object", ["overloaded_error"]),
        ("wrong_content_type", ["text/plain"]),
    ],
)
async def test_anthropic_error_says_what_was_wrong(
    name: str, words: list[str], fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(bad_body(name))
    with pytest.raises(ProviderError) as info:
        await engine_factory(cache=False, max_attempts=1).generate(
            provider_for("anthropic", fake_llm_server), chat()
        )
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_usage_with_wrong_types_is_an_error_not_a_crash(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    if kind == "openai":
        body = (
            b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant",'
            b' "content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": "many"}}'
        )
    else:
        body = (
            b'{"id": "x", "type": "message", "content": [{"type": "text", "text": "hi"}],'
            b' "stop_reason": "end_turn", "usage": {"input_tokens": [1]}}'
        )
    fake_llm_server.script(raw(body))
    with pytest.raises(ProviderError, match="usage"):
        await engine_factory(cache=False, max_attempts=1).generate(
            provider_for(kind, fake_llm_server), chat()
        )


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_missing_usage_counts_zero_tokens(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    if kind == "openai":
        body = (
            b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant",'
            b' "content": "hi"}, "finish_reason": "stop"}]}'
        )
    else:
        body = b'{"id": "x", "type": "message", "content": [{"type": "text", "text": "hi"}]}'
    fake_llm_server.script(raw(body))
    completion = await engine_factory(cache=False).generate(
        provider_for(kind, fake_llm_server), chat()
    )
    assert completion.text == "hi"
    assert completion.usage.total_tokens == 0
    assert completion.request_id == "req_1"
