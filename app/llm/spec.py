"""Provider strings, parsed in one place.

::

    anthropic:<model>                 Anthropic Messages API (ANTHROPIC_API_KEY)
    openai:<model>                    OpenAI Chat Completions (OPENAI_API_KEY)
    openai:<model>@<base_url>         any OpenAI-compatible server (vLLM, llama.cpp, LiteLLM)
    offline:extractive                deterministic extractive baseline answerer (no network)
    offline:reference-judge           deterministic reference-based judge (no network)

A provider string never carries a secret: keys come only from the environment.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from app.errors import ConfigError

FAMILIES: dict[str, str] = {
    "anthropic": "Anthropic Messages API, e.g. anthropic:claude-sonnet-4-6",
    "openai": "OpenAI or an OpenAI-compatible server, e.g. openai:gpt-4o-mini or "
    "openai:qwen2-7b@http://127.0.0.1:8000/v1",
    "offline": "deterministic baselines: offline:extractive, offline:reference-judge",
}
OFFLINE_MODELS: tuple[str, ...] = ("extractive", "reference-judge")


@dataclass(frozen=True)
class ProviderSpec:
    """A parsed provider string: family, model id and optional ``base_url``."""

    family: str
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        text = f"{self.family}:{self.model}"
        return f"{text}@{self.base_url}" if self.base_url else text

    @property
    def offline(self) -> bool:
        """True for the network-free baselines (their numbers are not a model's)."""
        return self.family == "offline"

    @property
    def endpoint(self) -> str:
        """What the per-provider concurrency limit and the SDK client are keyed on."""
        return f"{self.family}@{self.base_url}" if self.base_url else self.family


@functools.lru_cache(maxsize=256)
def parse_provider(text: str) -> ProviderSpec:
    """Parse ``family:model[@base_url]``; raise :class:`ConfigError` naming the fix."""
    raw = text.strip()
    family, sep, rest = raw.partition(":")
    family = family.strip().lower()
    if not sep or family not in FAMILIES:
        known = "; ".join(f"{k} ({v})" for k, v in FAMILIES.items())
        raise ConfigError(
            f"unknown provider {raw!r}: write <family>:<model>, where family is one of: {known}"
        )
    model, at, base_url = rest.partition("@")
    if "@" in base_url:  # userinfo in the URL: refuse without echoing it
        raise ConfigError(
            f"provider {family}:{model.strip()}@…: the base_url carries credentials; "
            "remove them and set OPENAI_API_KEY instead"
        )
    model = model.strip()
    base_url = base_url.strip()
    if not model:
        raise ConfigError(f"provider {raw!r} names no model: write {family}:<model>")
    if at and not base_url:
        raise ConfigError(f"provider {raw!r} has an empty base_url after '@'")
    if at and family != "openai":
        raise ConfigError(
            f"provider {raw!r}: only openai:<model>@<base_url> takes a base_url "
            "(OpenAI-compatible servers)"
        )
    if at and not base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"provider {raw!r}: base_url must start with http:// or https://, "
            "e.g. openai:qwen2-7b@http://127.0.0.1:8000/v1"
        )
    if family == "offline" and model not in OFFLINE_MODELS:
        raise ConfigError(
            f"unknown offline provider {raw!r}: use one of "
            + ", ".join(f"offline:{m}" for m in OFFLINE_MODELS)
        )
    return ProviderSpec(family=family, model=model, base_url=base_url.rstrip("/") or None)
