"""How a metric gets into the one table: the :func:`metric` decorator fills :data:`REGISTRY`.

Every metric has a name, a direction, a kind (deterministic / judge), a unit, a scale
(binary 0/1 per case, or continuous) and a red-line flag. This module is the writing side
only and imports no metric: the metric modules import it. The harness reads the table
through :mod:`app.eval.scoring.table`, which imports the built-in metrics first.
"""

from __future__ import annotations

from collections.abc import Callable

from app.eval.scoring.base import Direction, Kind, MetricFn, MetricSpec, Scale

REGISTRY: dict[str, tuple[MetricSpec, MetricFn]] = {}
#: bumped by every change of :data:`REGISTRY` (:func:`metric`, :func:`forget`): the report
#: order and the ``--metrics`` selections (:mod:`app.eval.scoring.table`) are computed once
#: per version, not per case
_VERSION = [0]


def metric(
    name: str,
    *,
    direction: Direction,
    kind: Kind,
    unit: str,
    scale: Scale,
    group: str,
    description: str,
    red_line: bool = False,
) -> Callable[[MetricFn], MetricFn]:
    """Register a metric function under ``name``."""

    def wrap(fn: MetricFn) -> MetricFn:
        if name in REGISTRY:
            raise RuntimeError(f"metric {name!r} registered twice")
        spec = MetricSpec(name, direction, kind, unit, scale, red_line, group, description)
        REGISTRY[name] = (spec, fn)
        _VERSION[0] += 1
        return fn

    return wrap


def forget(name: str) -> None:
    """Remove a metric (tests that register a temporary one)."""
    REGISTRY.pop(name, None)
    _VERSION[0] += 1


def version() -> tuple[int, int]:
    """Changes whenever :data:`REGISTRY` does (its length too: a direct ``REGISTRY.pop`` is
    noticed): what is derived from the table is computed once per version."""
    return _VERSION[0], len(REGISTRY)
