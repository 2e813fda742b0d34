"""The one provider-family table, and the model-string parser that reads it.

Each :class:`Family` names its provider (a ``"module:Class"`` loaded on first use, so an
offline run imports no SDK, or a factory), says whether it takes ``@<base_url>``, and, for a
closed family such as ``offline``, which models it has (each with its own provider).

The families of the model layer are listed in :data:`FAMILIES` below. A package above the
model layer (the offline baselines, a third-party provider) adds its own through
:func:`app.llm.providers.register_provider`; nothing here names a package above
``app.llm``. Adding an OpenAI-like family is one provider module plus one entry here
(``docs/extending/add-a-provider.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.errors import ConfigError
from app.llm.spec import ModelRef, ProviderSpec

if TYPE_CHECKING:
    from app.llm.providers.base import Provider

#: a provider class or any callable that makes one from its spec
Factory = Callable[[ProviderSpec], "Provider"]


@dataclass(frozen=True)
class Family:
    """One provider family: ``name:<model>`` (``name:<model>@<url>`` when ``base_url``)."""

    name: str
    help: str  # one line with an example, shown by every "unknown provider" error
    provider: str | Factory | None = None  # None: a closed family, see ``models``
    base_url: bool = False
    #: a closed family's models, each with its provider (``offline:extractive``)
    models: Mapping[str, str | Factory] = field(default_factory=dict)

    def target(self, model: str) -> str | Factory:
        """The provider serving ``name:model``."""
        found = self.models.get(model, self.provider)
        if found is None:  # pragma: no cover - the parser refuses an unknown closed model
            raise KeyError(f"{self.name}:{model}")
        return found


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "anthropic",
            "Anthropic Messages API, e.g. anthropic:claude-sonnet-4-6",
            "app.llm.providers.anthropic:AnthropicProvider",
        ),
        Family(
            "openai",
            "OpenAI or an OpenAI-compatible server, e.g. openai:gpt-4o-mini or "
            "openai:qwen2-7b@http://127.0.0.1:8000/v1",
            "app.llm.providers.openai:OpenAIProvider",
            base_url=True,
        ),
        Family(
            "local",
            "the local model tier of `make local-model`, e.g. local:smollm2",
            "app.llm.providers.local:LocalProvider",
        ),
        # a new family: its entry above this line (docs/extending/add-a-provider.md)
    )
}


def describe() -> str:
    """Every family with its help line, for an error message."""
    return "; ".join(f"{f.name} ({_help(f)})" for f in FAMILIES.values())


def _help(f: Family) -> str:
    if f.provider is None and f.models:
        return f"{f.help}: " + ", ".join(f"{f.name}:{m}" for m in f.models)
    return f.help


def base_url_families() -> tuple[str, ...]:
    """The families that take ``<family>:<model>@<base_url>``."""
    return tuple(f.name for f in FAMILIES.values() if f.base_url)


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
    entry = FAMILIES.get(family)
    if entry is None:
        raise ConfigError(
            f"unknown provider {raw!r}: write <family>:<model>, where family is one of: "
            f"{describe()} (a new family is added with app.llm.providers.register_provider)"
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
    if at and not entry.base_url:
        takers = base_url_families()
        raise ConfigError(
            f"provider {raw!r}: the {family} family takes no base_url; "
            + (
                "only " + ", ".join(f"{t}:<model>@<base_url>" for t in takers) + " do"
                if takers
                else "no registered family does"
            )
            + " (register_provider(..., base_url=True) adds one)"
        )
    if at and not base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"provider {raw!r}: base_url must start with http:// or https://, "
            "e.g. openai:qwen2-7b@http://127.0.0.1:8000/v1"
        )
    if entry.provider is None and model not in entry.models:
        raise ConfigError(
            f"unknown {family} provider {raw!r}: use one of "
            + ", ".join(f"{family}:{m}" for m in entry.models)
        )
    spec = ProviderSpec(family=family, model=model, base_url=base_url.rstrip("/") or None)
    return ModelRef(raw=text, model=model, provider=spec)


def parse_provider(text: str) -> ProviderSpec:
    """:func:`parse_model` for callers that call the model: a bare id is refused."""
    ref = parse_model(text)
    if ref.provider is None:
        raise ConfigError(
            f"unknown provider {ref.raw!r}: write <family>:<model>, where family is one of: "
            f"{describe()}"
        )
    return ref.provider
