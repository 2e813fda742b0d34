"""Provider registry: one table from a provider family (or offline model) to its class.

Modules are imported only when their provider is first used, so an evaluation on the
offline baselines never imports an SDK, and an OpenAI run never imports Anthropic's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from app.llm import spec as _spec
from app.llm.providers.base import Provider
from app.llm.spec import ProviderSpec

__all__ = ["Provider", "create_provider", "register_provider"]

# key: family, or "offline:<model>" for the offline baselines -> "module:Class"
_TABLE: dict[str, str | Callable[[ProviderSpec], Provider]] = {
    "anthropic": "app.llm.providers.anthropic:AnthropicProvider",
    "openai": "app.llm.providers.openai:OpenAIProvider",
    "offline:extractive": "app.llm.providers.offline_extractive:ExtractiveProvider",
    "offline:reference-judge": "app.llm.providers.offline_judge:ReferenceJudgeProvider",
}


def register_provider(
    key: str, factory: Callable[[ProviderSpec], Provider], description: str = ""
) -> None:
    """Plug in a provider under a new family (``myfamily``) or an ``offline:<model>`` key;
    provider strings naming it then parse."""
    family, _, model = key.partition(":")
    if family == "offline" and model:
        if model not in _spec.OFFLINE_MODELS:
            _spec.OFFLINE_MODELS += (model,)
    else:
        _spec.FAMILIES.setdefault(family, description or f"{family}:<model>")
    _spec.parse_provider.cache_clear()
    _TABLE[key] = factory


def _key(spec: ProviderSpec) -> str:
    return f"offline:{spec.model}" if spec.family == "offline" else spec.family


def create_provider(spec: ProviderSpec) -> Provider:
    """Instantiate the provider for ``spec`` (may raise ConfigError for a missing key)."""
    target = _TABLE[_key(spec)]
    if isinstance(target, str):
        module_name, _, cls_name = target.partition(":")
        cls: Callable[[ProviderSpec], Provider] = getattr(
            importlib.import_module(module_name), cls_name
        )
        return cls(spec)
    return target(spec)
