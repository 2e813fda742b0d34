"""A parsed model string: :class:`ModelRef` (and the :class:`ProviderSpec` it names).

The one parser is :func:`app.llm.providers.families.parse_model` (``from app.llm import
parse_model``), next to the one family table it reads:

::

    anthropic:<model>                 Anthropic Messages API (ANTHROPIC_API_KEY)
    openai:<model>                    OpenAI Chat Completions (OPENAI_API_KEY)
    openai:<model>@<base_url>         any OpenAI-compatible server (vLLM, llama.cpp, LiteLLM)
    local:<model>                     the local model tier (``make local-model``)
    offline:extractive                deterministic extractive baseline answerer (no network)
    offline:reference-judge           deterministic reference-based judge (no network)
    <family>:<model>                  a provider added with ``register_provider("<family>", …)``
    <model>                           a bare model id: renders a prompt, calls nothing

The families are the one table :data:`app.llm.providers.families.FAMILIES`; the ``offline`` family is
registered by the offline baselines (the package above the model layer) through the same
``register_provider`` seam a third-party provider uses, when the edges (the ``rag``
command, :mod:`app.eval.config`, the pytest plugin) import it.

``parse_model`` yields a :class:`ModelRef` (provider family, model id, base_url, offline
flag) for every consumer: the prompt renderer (``APPLICABLE_MODELS``, chat format, wire
payload), the engine, the judges, the run metadata. ``parse_provider`` is the same parse
for callers that need a provider (``ModelRef.provider``).

A model string never carries a secret: keys come only from the environment.
"""

from __future__ import annotations

from dataclasses import dataclass


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
            from app.errors import ConfigError

            raise ConfigError(
                f"model {self.raw!r} names no provider: write <family>:<model> "
                "(app.llm.parse_provider names the registered families)"
            )
        return self.provider
