"""The engine with the real openai / anthropic SDKs against the local fake server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from app.errors import ConfigError, ProviderError
from app.llm.engine import Engine
from app.llm.types import ChatRequest
from tests.support.fake_llm_server import (
    FakeLLMServer,
    drop,
    hang,
    malformed,
    rate_limited,
    server_error,
    status,
)
from tests.unit.llm.helpers import chat

pytestmark = pytest.mark.usefixtures("planted_keys")

EngineFactory = Callable[..., Engine]


def openai_provider(server: FakeLLMServer, model: str = "gpt-4o-mini") -> str:
    return f"openai:{model}@{server.openai_base_url}"


PROVIDERS = ["openai", "anthropic"]


def provider_for(kind: str, server: FakeLLMServer) -> str:
    return openai_provider(server) if kind == "openai" else "anthropic:claude-sonnet-4-6"


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_plain_call_fills_the_completion(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script("Paris.")
    engine = engine_factory(cache=False)
    completion = await engine.generate(provider_for(kind, fake_llm_server), chat("capital?"))
    assert completion.text == "Paris."
    assert completion.provider == kind
    assert completion.request_id == "req_1"
    assert completion.usage.output_tokens == 1
    assert completion.cost_usd is not None and completion.cost_usd > 0
    assert completion.cached is False
    assert engine.stats.calls == 1 and engine.stats.retries == 0


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_retry_after_is_honoured(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(rate_limited(retry_after=1.0), "ok")
    engine = engine_factory(cache=False)
    completion = await engine.generate(provider_for(kind, fake_llm_server), chat())
    assert completion.text == "ok"
    got = fake_llm_server.received
    assert len(got) == 2
    # the server saw the retry after Retry-After, and not a second back-off on top of it
    # (measured between the two requests: the SDK's import before the first is not counted)
    assert 0.95 <= got[1].at - got[0].at < 2.0
    assert engine.stats.retries == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_5xx_is_retried_then_succeeds(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(server_error(500), server_error(503), "recovered")
    engine = engine_factory(cache=False)
    completion = await engine.generate(provider_for(kind, fake_llm_server), chat())
    assert completion.text == "recovered"
    assert fake_llm_server.requests == 3
    assert (engine.stats.calls, engine.stats.retries, engine.stats.errors) == (3, 2, 0)


@pytest.mark.parametrize("code", [400, 401])
async def test_400_and_401_are_not_retried(
    code: int, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(status(code), "never")
    engine = engine_factory(cache=False)
    with pytest.raises(ProviderError) as info:
        await engine.generate(openai_provider(fake_llm_server), chat())
    assert info.value.status == code and info.value.retryable is False
    assert fake_llm_server.requests == 1
    assert engine.stats.retries == 0 and engine.stats.errors == 1


async def test_retry_budget_exhausted_is_an_error_and_the_run_goes_on(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    engine = engine_factory(cache=False, retry_budget=2, max_attempts=10)
    fake_llm_server.script(*[server_error(500)] * 3)
    provider = openai_provider(fake_llm_server)
    with pytest.raises(ProviderError, match="retry budget of 2 retries") as info:
        await engine.generate(provider, chat("first"))
    assert info.value.status == 500
    assert fake_llm_server.requests == 3  # first try + the 2 budgeted retries
    # the run goes on: the next request succeeds (and is not retried any more)
    completion = await engine.generate(provider, chat("second"))
    assert completion.text == "echo: second"
    assert engine.stats.errors == 1 and engine.stats.retries == 2


async def test_max_attempts_exhausted(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    engine = engine_factory(cache=False, max_attempts=3)
    fake_llm_server.script(*[server_error(502)] * 5)
    with pytest.raises(ProviderError) as info:
        await engine.generate(openai_provider(fake_llm_server), chat())
    assert info.value.status == 502
    assert fake_llm_server.requests == 3


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_timeout_is_retried(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(hang(10), "after the hang")
    engine = engine_factory(cache=False, timeout_s=0.5)
    completion = await engine.generate(provider_for(kind, fake_llm_server), chat())
    assert completion.text == "after the hang"
    got = fake_llm_server.received
    # the hanging attempt was given up at its 0.5 s timeout, not after the server's 10 s
    # (measured between the two requests: the SDK's import before the first is not counted)
    assert len(got) == 2 and got[1].at - got[0].at < 3.0
    assert engine.stats.timeouts == 1 and engine.stats.retries == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_connection_drop_is_retried(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(drop(), "back")
    engine = engine_factory(cache=False)
    completion = await engine.generate(provider_for(kind, fake_llm_server), chat())
    assert completion.text == "back"
    assert engine.stats.retries == 1


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_malformed_body_is_an_error_with_provider_and_request_id(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    # a cut body is transient (issue 12): retried up to max_attempts, then a recorded error
    fake_llm_server.script(malformed(), malformed())
    engine = engine_factory(cache=True, max_attempts=2)
    provider = provider_for(kind, fake_llm_server)
    with pytest.raises(ProviderError) as info:
        await engine.generate(provider, chat())
    err = info.value
    assert err.provider == provider and err.request_id == "req_2"
    assert "not JSON" in str(err) and "req_2" in str(err)
    assert fake_llm_server.requests == 2  # the first try and one retry
    # errors are never cached: the same request goes to the server again
    assert (await engine.generate(provider, chat())).text == "echo: hello"
    assert fake_llm_server.requests == 3


async def test_concurrency_never_exceeds_the_limit(engine_factory: EngineFactory) -> None:
    with FakeLLMServer(latency_s=0.05) as server:
        engine = engine_factory(cache=False, concurrency=4)
        provider = openai_provider(server)
        results = await asyncio.gather(
            *(engine.generate(provider, chat(f"q{i}")) for i in range(24))
        )
        assert [r.text for r in results] == [f"echo: q{i}" for i in range(24)]
        assert server.peak_in_flight == 4


async def test_per_provider_limit_is_separate_from_global(engine_factory: EngineFactory) -> None:
    with FakeLLMServer(latency_s=0.05) as server:
        engine = engine_factory(cache=False, concurrency=8, per_provider_concurrency=2)
        provider = openai_provider(server)
        await asyncio.gather(*(engine.generate(provider, chat(f"q{i}")) for i in range(10)))
        assert server.peak_in_flight == 2


async def test_anthropic_system_is_a_cacheable_block_and_cache_tokens_are_counted(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    engine = engine_factory(cache=False)
    system = "You answer from the documents. " * 5
    first = await engine.generate("anthropic:claude-sonnet-4-6", chat("a", system=system))
    second = await engine.generate("anthropic:claude-sonnet-4-6", chat("b", system=system))
    body = fake_llm_server.received[0].body
    assert body["system"] == [
        {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
    ]
    assert "temperature" not in body  # removed in API version 2026-10-21
    words = len(system.split())
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens) == (words, 0)
    assert (second.usage.cache_write_tokens, second.usage.cache_read_tokens) == (0, words)
    assert engine.stats.cache_read_tokens == words


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_llama2_prompt_text_is_one_user_message(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    text = "<s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nhi [/INST]"
    request = chat("hi", system="sys", chat_format="llama2", prompt_text=text)
    engine = engine_factory(cache=False)
    await engine.generate(provider_for(kind, fake_llm_server), request)
    body = fake_llm_server.received[0].body
    assert body["messages"] == [{"role": "user", "content": text}]
    assert "system" not in body


async def test_openai_wire_parameters(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    request = chat("q", temperature=0.0, max_tokens=77, stop=("###",), response_format="json")
    await engine_factory(cache=False).generate(openai_provider(fake_llm_server), request)
    body = fake_llm_server.received[0].body
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert body["max_tokens"] == 77 and body["stop"] == ["###"] and body["temperature"] == 0.0
    assert body["response_format"] == {"type": "json_object"}


async def test_sdk_retries_are_off(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(server_error(500), "ok")
    engine = engine_factory(cache=False, max_attempts=1)
    with pytest.raises(ProviderError):
        await engine.generate(openai_provider(fake_llm_server), chat())
    assert fake_llm_server.requests == 1  # the SDK did not retry on its own


@pytest.mark.parametrize(
    ("provider", "env"),
    [("anthropic:claude-sonnet-4-6", "ANTHROPIC_API_KEY"), ("openai:gpt-4o", "OPENAI_API_KEY")],
)
async def test_missing_key_names_the_variable(
    provider: str, env: str, monkeypatch: pytest.MonkeyPatch, engine_factory: EngineFactory
) -> None:
    monkeypatch.delenv(env)
    with pytest.raises(ConfigError, match=env):
        await engine_factory().generate(provider, chat())


async def test_local_server_runs_without_a_key(
    fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, engine_factory: EngineFactory
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    completion = await engine_factory(cache=False).generate(
        openai_provider(fake_llm_server, "qwen2-7b"), chat()
    )
    assert completion.text == "echo: hello"
    assert completion.cost_usd is None  # qwen2-7b is not in the price table
    auth = fake_llm_server.received[0].headers["authorization"]
    assert auth == "Bearer sk-no-key-required"


async def test_unknown_provider_is_a_config_error(engine_factory: EngineFactory) -> None:
    with pytest.raises(ConfigError, match="unknown provider"):
        await engine_factory().generate("mistral:large", ChatRequest("m", None, ()))


async def test_prepare_fails_fast_on_a_missing_key(
    monkeypatch: pytest.MonkeyPatch, engine_factory: EngineFactory
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    engine = engine_factory()
    engine.prepare("offline:extractive", "openai:gpt-4o")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        engine.prepare("anthropic:claude-haiku-4-5")
    assert engine.stats.calls == 0


async def test_stats_and_lazy_package_exports(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    import app.llm

    assert app.llm.Engine is Engine
    engine = engine_factory(cache=False)
    await engine.generate(openai_provider(fake_llm_server), chat("one two three"))
    stats = engine.stats.as_dict()
    assert stats["calls"] == 1 and stats["completions"] == 1
    assert stats["input_tokens"] == 6  # fake server: words of system + user text
    # gpt-4o-mini: $0.15 in / $0.60 out per MTok; 6 in, 4 out ("echo: one two three")
    assert stats["cost_usd"] == pytest.approx((6 * 0.15 + 4 * 0.60) / 1e6)


async def test_official_openai_endpoint_gets_max_completion_tokens(
    fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, engine_factory: EngineFactory
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm_server.openai_base_url)  # SDK default URL
    await engine_factory(cache=False).generate("openai:gpt-4o-mini", chat("q", max_tokens=55))
    body = fake_llm_server.received[0].body
    assert body["max_completion_tokens"] == 55 and "max_tokens" not in body


async def test_registered_offline_provider_parses_and_runs(engine_factory: EngineFactory) -> None:
    from app.llm.providers.base import Provider
    from app.llm.types import Completion
    from tests.support.registry import registered

    class Constant(Provider):
        family = "offline"
        cacheable = False

        async def generate(
            self, request: ChatRequest, *, model: str, timeout_s: float
        ) -> Completion:
            return Completion(text="constant", provider="offline", model=model)

    with registered({"offline:constant": Constant}):  # the family table restored afterwards
        completion = await engine_factory().generate("offline:constant", chat())
    assert (completion.text, completion.cost_usd) == ("constant", 0.0)


async def test_calls_count_what_was_sent_not_what_was_queued(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    """A run stopped while calls waited for a slot counted them as calls (after --resume the
    report's engine calls were 0.7 % above the requests the provider saw)."""
    fake_llm_server.latency_s = 0.3
    engine = engine_factory(cache=False, concurrency=1)
    provider = openai_provider(fake_llm_server)
    tasks = [asyncio.create_task(engine.generate(provider, chat(f"q{i}"))) for i in range(6)]
    for _ in range(200):  # until the first is with the server, the other five queued
        if fake_llm_server.requests:
            break
        await asyncio.sleep(0.01)
    for t in tasks:  # the run stops (Ctrl-C, --max-cost)
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert fake_llm_server.requests == 1
    assert engine.stats.calls == 1, engine.stats.calls
