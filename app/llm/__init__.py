"""Model providers and the middleware around them (cache, retries, limits, cost).

Public names (imported lazily, so ``import app.llm.types`` stays cheap)::

    from app.llm import Engine, EngineConfig, EngineStats, ProviderSpec, parse_provider
    from app.llm import ModelRef, parse_model    # the one model-string parser

Provider strings: ``anthropic:<model>``, ``openai:<model>[@<base_url>]``, ``local:<model>``,
a family added with ``app.llm.providers.register_provider`` (the offline baselines add
``offline:extractive`` and ``offline:reference-judge`` that way). The families are one table,
:mod:`app.llm.providers.families`, read by the one parser next to it.
"""

from __future__ import annotations

from typing import Any

from app.faces import face_attr

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineStats",
    "ModelRef",
    "ProviderSpec",
    "parse_model",
    "parse_provider",
]

_EXPORTS = {
    "Engine": "app.llm.engine",
    "EngineConfig": "app.llm.engine",
    "EngineStats": "app.llm.engine",
    "ModelRef": "app.llm.spec",
    "ProviderSpec": "app.llm.spec",
    "parse_model": "app.llm.providers.families",
    "parse_provider": "app.llm.providers.families",
}


def __getattr__(name: str) -> Any:
    return face_attr(__name__, _EXPORTS, name)
