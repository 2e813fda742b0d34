"""One table of metrics, filled by the :func:`metric` decorator.

Every metric has a name, a direction, a kind (deterministic / judge), a unit, a scale
(binary 0/1 per case, or continuous) and a red-line flag. :func:`score_case` runs all of
them on one case and never raises for a metric that does not apply: it returns a
``null`` score with a reason instead.
"""

from __future__ import annotations

from collections.abc import Callable

from app.eval.datasets import Case
from app.eval.metrics.base import (
    Direction,
    Kind,
    MetricContext,
    MetricFn,
    MetricSpec,
    Observation,
    Scale,
    Score,
)

REGISTRY: dict[str, tuple[MetricSpec, MetricFn]] = {}


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
        return fn

    return wrap


GROUP_ORDER = ("retrieval", "generation", "rewrite", "safety", "cost")


def _ordered() -> list[str]:
    _load()
    return sorted(REGISTRY, key=lambda n: GROUP_ORDER.index(REGISTRY[n][0].group))


def specs() -> dict[str, MetricSpec]:
    """Every metric's spec, grouped retrieval → generation → rewrite → safety → cost."""
    return {name: REGISTRY[name][0] for name in _ordered()}


def score_case(case: Case, obs: Observation, ctx: MetricContext) -> dict[str, Score]:
    """Every registered metric for one case."""
    return {name: REGISTRY[name][1](case, obs, ctx) for name in _ordered()}


def _load() -> None:
    # The metric modules register themselves on import.
    from app.eval.metrics import generation, retrieval_case, safety  # noqa: F401
