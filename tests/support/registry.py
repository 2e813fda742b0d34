"""Register test providers for a while: the provider tables are restored afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.llm import spec as spec_module
from app.llm.providers import _TABLE, Factory, register_provider


@contextmanager
def registered(providers: dict[str, Factory], *, base_url: bool = False) -> Iterator[None]:
    """``register_provider(key, factory, base_url=…)`` for each item, undone on exit
    (families, offline models, base-URL families, the class table, the parser's cache)."""
    saved = (
        dict(spec_module.FAMILIES),
        spec_module.OFFLINE_MODELS,
        spec_module.BASE_URL_FAMILIES,
        dict(_TABLE),
    )
    try:
        for key, factory in providers.items():
            register_provider(key, factory, base_url=base_url)
        yield
    finally:
        spec_module.FAMILIES.clear()
        spec_module.FAMILIES.update(saved[0])
        spec_module.OFFLINE_MODELS = saved[1]
        spec_module.BASE_URL_FAMILIES = saved[2]
        _TABLE.clear()
        _TABLE.update(saved[3])
        spec_module.parse_model.cache_clear()
