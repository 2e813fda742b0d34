from __future__ import annotations

import pytest

from app.errors import ConfigError
from app.llm.providers.families import parse_model, parse_provider
from app.llm.spec import ProviderSpec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("anthropic:claude-sonnet-4-6", ProviderSpec("anthropic", "claude-sonnet-4-6")),
        ("openai:gpt-4o-mini", ProviderSpec("openai", "gpt-4o-mini")),
        (
            "openai:qwen2-7b@http://127.0.0.1:8000/v1/",
            ProviderSpec("openai", "qwen2-7b", "http://127.0.0.1:8000/v1"),
        ),
        ("offline:extractive", ProviderSpec("offline", "extractive")),
        ("offline:reference-judge", ProviderSpec("offline", "reference-judge")),
    ],
)
def test_parse_provider(text: str, expected: ProviderSpec) -> None:
    assert parse_provider(text) == expected


def test_round_trip_and_flags() -> None:
    spec = parse_provider("openai:qwen2-7b@http://127.0.0.1:8000/v1")
    assert str(spec) == "openai:qwen2-7b@http://127.0.0.1:8000/v1"
    assert spec.endpoint == "openai@http://127.0.0.1:8000/v1"
    assert parse_provider("offline:extractive").offline is True
    assert spec.offline is False


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("gemini:pro", "unknown provider 'gemini:pro'"),
        ("claude-sonnet-4-6", "unknown provider"),
        ("openai:", "names no model"),
        ("anthropic:claude@http://x", "only openai"),
        ("openai:m@ftp://x", "must start with http"),
        ("offline:gpt", "offline:extractive, offline:reference-judge"),
        ("openai:m@http://user:secret@host/v1", "credentials"),
    ],
)
def test_bad_provider_strings(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")) as info:
        parse_provider(text)
    assert "secret" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "family", "model", "base_url", "offline"),
    [
        ("anthropic:claude-opus-4-7", "anthropic", "claude-opus-4-7", None, False),
        (
            "openai:qwen2-7b@http://127.0.0.1:8000/v1",
            "openai",
            "qwen2-7b",
            "http://127.0.0.1:8000/v1",
            False,
        ),
        ("OpenAI:gpt-4o", "openai", "gpt-4o", None, False),
        ("offline:extractive", "offline", "extractive", None, True),
        ("claude-sonnet-4-6", None, "claude-sonnet-4-6", None, False),  # bare id: render only
        ("meta-llama/Llama-2-13b-chat-hf", None, "meta-llama/Llama-2-13b-chat-hf", None, False),
    ],
)
def test_parse_model_is_the_one_parser(
    text: str, family: str | None, model: str, base_url: str | None, offline: bool
) -> None:
    ref = parse_model(text)
    assert (ref.family, ref.model, ref.base_url, ref.offline) == (family, model, base_url, offline)
    if family is None:
        assert ref.provider is None
        with pytest.raises(ConfigError, match="unknown provider"):
            parse_provider(text)
    else:
        assert parse_provider(text) == ref.provider


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("mistral:large", "register_provider"),  # an unknown family is refused, not read as an id
        ("qwen2-7b@http://127.0.0.1:8000/v1", "needs a provider family"),
    ],
)
def test_parse_model_refuses(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_model(text)


def test_registered_family_parses_everywhere_and_may_take_a_base_url() -> None:
    from app.llm.providers.base import Provider
    from tests.support.registry import registered

    with pytest.raises(ConfigError):
        parse_model("tinyfam:m@http://127.0.0.1:9/v1")
    with registered({"tinyfam": Provider}, base_url=True):
        ref = parse_model("tinyfam:m@http://127.0.0.1:9/v1/")
        assert ref.provider == ProviderSpec("tinyfam", "m", "http://127.0.0.1:9/v1")
        assert not ref.offline
    with pytest.raises(ConfigError):  # gone again
        parse_model("tinyfam:m@http://127.0.0.1:9/v1")
