"""Public faces of packages, imported on first use (PEP 562).

A package face lists its public names in ``__all__`` and maps each to the module that
defines it; ``import app.eval.report.records`` then stays cheap (the face imports nothing
until a name is asked for), and a face can never close an import cycle::

    _EXPORTS = {"Report": "app.eval.report.records", ...}

    def __getattr__(name: str) -> Any:
        return face_attr(__name__, _EXPORTS, name)

(A ``TYPE_CHECKING`` block re-imports the names for the type checker.)
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def face_attr(package: str, exports: Mapping[str, str], name: str) -> Any:
    """The public ``name`` of ``package``, imported from its defining module."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
