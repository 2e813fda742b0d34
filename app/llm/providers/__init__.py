"""Provider registry: one table from a provider family (or offline model) to its class.

Modules are imported only when their provider is first used, so an evaluation on the
offline baselines never imports an SDK, and an OpenAI run never imports Anthropic's
(a provider module imports its SDK inside the constructor, so :func:`request_payload`
can load the class to build a wire body without any SDK or key).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Literal

from app.llm import spec as _spec
from app.llm.providers.base import Provider
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest

__all__ = [
    "Provider",
    "create_provider",
    "provider_class",
    "provider_flag",
    "register_provider",
    "request_payload",
]

Factory = Callable[[ProviderSpec], Provider]

# key: family, or "offline:<model>" for the offline baselines -> "module:Class"
_TABLE: dict[str, str | Factory] = {
    "anthropic": "app.llm.providers.anthropic:AnthropicProvider",
    "openai": "app.llm.providers.openai:OpenAIProvider",
    "offline:extractive": "app.baselines.extractive:ExtractiveProvider",
    "offline:reference-judge": "app.baselines.reference_judge:ReferenceJudgeProvider",
}


def register_provider(
    key: str, factory: Factory, description: str = "", *, base_url: bool = False
) -> None:
    """Plug in a provider under a new family (``myfamily``) or an ``offline:<model>`` key;
    model strings naming it then parse everywhere (render, engine, judges, reports).
    ``base_url=True`` lets the family take ``myfamily:<model>@<url>``. A provider class
    (a :class:`Provider` subclass) also gives ``rag prompts render --json`` its wire body
    through :meth:`Provider.payload`."""
    family, _, model = key.partition(":")
    family = family.strip().lower()
    if family == "offline" and model:
        if model not in _spec.OFFLINE_MODELS:
            _spec.OFFLINE_MODELS += (model,)
        key = f"offline:{model}"
    else:
        _spec.FAMILIES.setdefault(family, description or f"{family}:<model>")
        key = family
    if base_url and family not in _spec.BASE_URL_FAMILIES:
        _spec.BASE_URL_FAMILIES += (family,)
    _spec.parse_model.cache_clear()
    _TABLE[key] = factory


def _key(spec: ProviderSpec) -> str:
    return f"offline:{spec.model}" if spec.family == "offline" else spec.family


def _target(spec: ProviderSpec) -> Factory:
    target = _TABLE[_key(spec)]
    if isinstance(target, str):
        module_name, _, cls_name = target.partition(":")
        loaded: Factory = getattr(importlib.import_module(module_name), cls_name)
        return loaded
    return target


def provider_class(spec: ProviderSpec) -> type[Provider]:
    """The class that serves ``spec`` (:class:`Provider` itself for a plain factory)."""
    target = _target(spec)
    return target if isinstance(target, type) and issubclass(target, Provider) else Provider


#: (model string, flag) -> (the ProviderSpec it parsed to, the flag): the spec is the
#: parser's cached object, replaced when a provider is registered, so a stale entry is
#: never used
_FLAGS: dict[tuple[str, str], tuple[ProviderSpec, bool]] = {}


def provider_flag(model: str, flag: Literal["deterministic", "in_process"]) -> bool:
    """A class flag of the provider serving ``model`` (a ``family:model`` string), as
    :class:`Provider` documents it: ``deterministic`` (a completion is a pure function of
    its request) or ``in_process`` (computed in this process, nothing awaited). The one
    place the engine, the judges and the worker processes learn what a provider is."""
    spec = _spec.parse_provider(model)
    known = _FLAGS.get((model, flag))
    if known is not None and known[0] is spec:
        return known[1]
    value = bool(getattr(provider_class(spec), flag))
    _FLAGS[model, flag] = (spec, value)
    return value


def create_provider(spec: ProviderSpec) -> Provider:
    """Instantiate the provider for ``spec`` (may raise ConfigError for a missing key)."""
    return _target(spec)(spec)


def request_payload(spec: ProviderSpec, request: ChatRequest) -> dict[str, Any]:
    """The body ``spec``'s provider sends for ``request``: built by the same function the
    provider's ``generate`` uses, so it is exactly what goes on the wire (never a key or
    an auth header: those are the SDK's, from the environment)."""
    return provider_class(spec).payload(request, model=spec.model, base_url=spec.base_url)


def _register_local() -> None:
    from app.llm.providers.local import LocalProvider

    register_provider(
        "local", LocalProvider, "the local model tier of `make local-model`, e.g. local:smollm2"
    )


_register_local()
