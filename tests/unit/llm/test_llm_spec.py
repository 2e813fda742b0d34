from __future__ import annotations

import pytest

from app.errors import ConfigError
from app.llm.spec import ProviderSpec, parse_provider


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
