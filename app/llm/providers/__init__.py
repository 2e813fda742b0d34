"""Provider registry: the seam over the one family table (:mod:`app.llm.families`).

Modules are imported only when their provider is first used, so an evaluation on the
offline baselines never imports an SDK, and an OpenAI run never imports Anthropic's
(a provider module imports its SDK inside the constructor, so :func:`request_payload`
can load the class to build a wire body without any SDK or key).
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

from app.llm.providers import families
from app.llm.providers.base import Provider
from app.llm.providers.families import Factory, Family
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest

__all__ = [
    "Factory",
    "Provider",
    "create_provider",
    "provider_class",
    "provider_flag",
    "register_provider",
    "request_payload",
]


def register_provider(
    key: str, factory: Factory | str, description: str = "", *, base_url: bool = False
) -> None:
    """Plug in a provider under a new family (``myfamily``) or a closed family's model
    (``offline:<model>``); model strings naming it then parse everywhere (render, engine,
    judges, reports). ``factory`` is a provider class, a callable that makes one from its
    :class:`ProviderSpec`, or ``"module:Class"`` (imported on first use, so registering
    loads nothing). ``base_url=True`` lets the family take ``myfamily:<model>@<url>``. A
    provider class (a :class:`Provider` subclass) also gives ``rag prompts render --json``
    its wire body through :meth:`Provider.payload`. This is the one seam: the offline
    baselines register through it too (:mod:`app.baselines`)."""
    family, _, model = key.partition(":")
    family = family.strip().lower()
    model = model.strip()
    old = families.FAMILIES.get(family)
    if model:  # a closed family's model: offline:<model>
        help_text = old.help if old is not None else (description or f"{family}:<model>")
        models = {**(old.models if old is not None else {}), model: factory}
        entry = Family(family, help_text, None, base_url or bool(old and old.base_url), models)
    else:
        entry = Family(
            family,
            description or (old.help if old is not None else f"{family}:<model>"),
            factory,
            base_url,
        )
    families.FAMILIES[family] = entry
    families.parse_model.cache_clear()


def _target(spec: ProviderSpec) -> Factory:
    target = families.FAMILIES[spec.family].target(spec.model)
    if isinstance(target, str):
        module_name, _, cls_name = target.partition(":")
        loaded: Factory = getattr(importlib.import_module(module_name), cls_name)
        return loaded
    return target


def provider_class(spec: ProviderSpec) -> type[Provider]:
    """The class that serves ``spec`` (:class:`Provider` itself for a plain factory)."""
    target = _target(spec)
    return target if isinstance(target, type) and issubclass(target, Provider) else Provider


def provider_flag(model: ProviderSpec, flag: Literal["deterministic", "in_process"]) -> bool:
    """A class flag of the provider serving ``model`` (parsed at the edge), as
    :class:`Provider` documents it: ``deterministic`` (a completion is a pure function of
    its request) or ``in_process`` (computed in this process, nothing awaited). The one
    place the engine, the judges and the worker processes learn what a provider is."""
    return bool(getattr(provider_class(model), flag))


def create_provider(spec: ProviderSpec) -> Provider:
    """Instantiate the provider for ``spec`` (may raise ConfigError for a missing key)."""
    return _target(spec)(spec)


def request_payload(spec: ProviderSpec, request: ChatRequest) -> dict[str, Any]:
    """The body ``spec``'s provider sends for ``request``: built by the same function the
    provider's ``generate`` uses, so it is exactly what goes on the wire (never a key or
    an auth header: those are the SDK's, from the environment)."""
    return provider_class(spec).payload(request, model=spec.model, base_url=spec.base_url)
