"""One table of metrics, filled by the :func:`metric` decorator.

Every metric has a name, a direction, a kind (deterministic / judge), a unit, a scale
(binary 0/1 per case, or continuous) and a red-line flag. :func:`score_case` runs all of
them on one case and never raises for a metric that does not apply: it returns a
``null`` score with a reason instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from app.errors import ConfigError
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


def score_case(
    case: Case, obs: Observation, ctx: MetricContext, selected: Collection[str] | None = None
) -> dict[str, Score]:
    """Every registered metric (or every ``selected`` one) for one case."""
    return {
        name: REGISTRY[name][1](case, obs, ctx)
        for name in _ordered()
        if selected is None or name in selected
    }


KINDS: tuple[Kind, ...] = ("deterministic", "judge")


def select_metrics(names: Iterable[str] = ()) -> tuple[str, ...]:
    """The metrics ``--metrics`` names, in report order: metric names and the kinds
    ``deterministic`` / ``judge`` (every metric of that kind); nothing or ``all`` = every
    metric. An unknown name is a :class:`ConfigError` listing the valid ones."""
    table = specs()
    wanted: set[str] = set()
    unknown: list[str] = []
    tokens = [t.strip() for t in names if t.strip()]
    for token in tokens or ["all"]:
        if token == "all":
            wanted.update(table)
        elif token in KINDS:
            wanted.update(n for n, s in table.items() if s.kind == token)
        elif token in table:
            wanted.add(token)
        else:
            unknown.append(token)
    if unknown:
        raise ConfigError(
            f"--metrics: unknown metric(s) {', '.join(repr(u) for u in unknown)}; valid: "
            f"all, {', '.join(KINDS)}, or metric names {', '.join(table)}"
        )
    return tuple(n for n in table if n in wanted)


def _load() -> None:
    # The metric modules register themselves on import.
    from app.eval.metrics import generation, judged, retrieval_case, safety  # noqa: F401
