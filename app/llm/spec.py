"""Model strings, parsed in one place (:func:`parse_model`).

::

    anthropic:<model>                 Anthropic Messages API (ANTHROPIC_API_KEY)
    openai:<model>                    OpenAI Chat Completions (OPENAI_API_KEY)
    openai:<model>@<base_url>         any OpenAI-compatible server (vLLM, llama.cpp, LiteLLM)
    offline:extractive                deterministic extractive baseline answerer (no network)
    offline:reference-judge           deterministic reference-based judge (no network)
    <family>:<model>                  a provider added with ``register_provider("<family>", …)``
    <model>                           a bare model id: renders a prompt, calls nothing

:func:`parse_model` yields a :class:`ModelRef` (provider family, model id, base_url, offline
flag) for every consumer: the prompt renderer (``APPLICABLE_MODELS``, chat format, wire
payload), the engine, the judges, the run metadata. :func:`parse_provider` is the same parse
for callers that need a provider (``ModelRef.provider``).

A model string never carries a secret: keys come only from the environment.
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
#: the families whose provider takes ``@<base_url>``
BASE_URL_FAMILIES: tuple[str, ...] = ("openai",)


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


@dataclass(frozen=True)
class ModelRef:
    """One parsed model string: ``provider`` is None for a bare model id (``gpt-4o``),
    which a prompt can be rendered for but the engine cannot call."""

    raw: str
    model: str  # the bare model id, as sent to the provider and matched by APPLICABLE_MODELS
    provider: ProviderSpec | None = None

    def __str__(self) -> str:
        return str(self.provider) if self.provider is not None else self.model

    @property
    def family(self) -> str | None:
        return self.provider.family if self.provider is not None else None

    @property
    def base_url(self) -> str | None:
        return self.provider.base_url if self.provider is not None else None

    @property
    def offline(self) -> bool:
        """True for the network-free baselines (their numbers are not a model's)."""
        return self.provider is not None and self.provider.offline

    def require_provider(self) -> ProviderSpec:
        """The provider to call; :class:`ConfigError` naming the fix for a bare model id."""
        if self.provider is None:
            raise ConfigError(
                f"unknown provider {self.raw!r}: write <family>:<model>, where family is one "
                f"of: {_families()}"
            )
        return self.provider


def _families() -> str:
    return "; ".join(f"{k} ({v})" for k, v in FAMILIES.items())


@functools.lru_cache(maxsize=512)
def parse_model(text: str) -> ModelRef:
    """Parse ``family:model[@base_url]`` or a bare model id; raise :class:`ConfigError`
    naming the fix. A ``head:`` that is not a registered family is refused (never read as
    part of a bare id), so a typo or an unregistered provider fails here, by name."""
    raw = text.strip()
    if not raw:
        raise ConfigError("model string is empty; pass e.g. --model anthropic:claude-sonnet-4-6")
    head, sep, rest = raw.partition(":")
    if not sep or "@" in head:
        if "@" in raw:
            raise ConfigError(
                f"model {raw!r}: a base_url needs a provider family, e.g. "
                "openai:qwen2-7b@http://127.0.0.1:8000/v1"
            )
        return ModelRef(raw=text, model=raw)
    family = head.strip().lower()
    if family not in FAMILIES:
        raise ConfigError(
            f"unknown provider {raw!r}: write <family>:<model>, where family is one of: "
            f"{_families()} (a new family is added with app.llm.providers.register_provider)"
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
    if at and family not in BASE_URL_FAMILIES:
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
    spec = ProviderSpec(family=family, model=model, base_url=base_url.rstrip("/") or None)
    return ModelRef(raw=text, model=model, provider=spec)


def parse_provider(text: str) -> ProviderSpec:
    """:func:`parse_model` for callers that call the model: a bare id is refused."""
    return parse_model(text).require_provider()
