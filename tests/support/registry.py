"""Register test providers for a while: the family table is restored afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from app.generation.registry.render import RenderedPrompt
from app.llm.providers import Factory, families, register_provider, request_payload


@contextmanager
def registered(providers: dict[str, Factory], *, base_url: bool = False) -> Iterator[None]:
    """``register_provider(key, factory, base_url=…)`` for each item, undone on exit
    (the one family table and the parser's cache)."""
    saved = dict(families.FAMILIES)
    try:
        for key, factory in providers.items():
            register_provider(key, factory, base_url=base_url)
        yield
    finally:
        families.FAMILIES.clear()
        families.FAMILIES.update(saved)
        families.parse_model.cache_clear()


def wire(rp: RenderedPrompt) -> dict[str, Any]:
    """The body ``rp``'s provider sends with the default sampling parameters."""
    return request_payload(rp.provider, rp.to_request())
