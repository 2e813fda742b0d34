"""One table of metrics, filled by the :func:`metric` decorator.

Every metric has a name, a direction, a kind (deterministic / judge), a unit, a scale
(binary 0/1 per case, or continuous) and a red-line flag. :func:`score_case` runs all of
them on one case and never raises for a metric that does not apply: it returns a
``null`` score with a reason instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from app.errors import ConfigError
from app.eval.datasets.case import Case
from app.eval.scoring.base import (
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
#: bumped by every change of :data:`REGISTRY` (:func:`metric`, :func:`forget`): the report
#: order and the ``--metrics`` selections below are computed once per version, not per case
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


GROUP_ORDER = ("retrieval", "generation", "rewrite", "safety", "cost")


class _Table:
    """The report order of :data:`REGISTRY` at one version (with its length: a direct
    ``REGISTRY.pop`` is noticed too) and what is derived from it."""

    __slots__ = ("key", "red_lines", "selections", "specs")

    def __init__(self, key: tuple[int, int]) -> None:
        self.key = key
        order = sorted(REGISTRY, key=lambda n: GROUP_ORDER.index(REGISTRY[n][0].group))
        self.specs = {name: REGISTRY[name][0] for name in order}
        self.red_lines = tuple(n for n, s in self.specs.items() if s.red_line)
        self.selections: dict[tuple[str, ...], tuple[str, ...]] = {}


_TABLE: list[_Table] = []


def _table() -> _Table:
    _load()
    key = (_VERSION[0], len(REGISTRY))
    if not _TABLE or _TABLE[0].key != key:
        _TABLE[:] = [_Table(key)]
    return _TABLE[0]


def _ordered() -> list[str]:
    return list(_table().specs)


def specs() -> dict[str, MetricSpec]:
    """Every metric's spec, grouped retrieval → generation → rewrite → safety → cost."""
    return dict(_table().specs)


def red_line_metrics() -> tuple[str, ...]:
    """The red-line metrics' names, in :func:`specs` order."""
    return _table().red_lines


def score_case(
    case: Case, obs: Observation, ctx: MetricContext, selected: Collection[str] | None = None
) -> dict[str, Score]:
    """Every registered metric (or every ``selected`` one) for one case."""
    return {
        name: REGISTRY[name][1](case, obs, ctx)
        for name in _table().specs
        if selected is None or name in selected
    }


KINDS: tuple[Kind, ...] = ("deterministic", "judge")


def select_metrics(names: Iterable[str] = ()) -> tuple[str, ...]:
    """The metrics ``--metrics`` names, in report order: metric names and the kinds
    ``deterministic`` / ``judge`` (every metric of that kind); nothing or ``all`` = every
    metric. An unknown name is a :class:`ConfigError` listing the valid ones (computed once
    per registry version and selection: the runner asks for every case)."""
    tokens = tuple(names)
    known = _table()
    chosen = known.selections.get(tokens)
    if chosen is None:
        chosen = known.selections[tokens] = _select(known.specs, tokens)
    return chosen


def _select(table: dict[str, MetricSpec], names: tuple[str, ...]) -> tuple[str, ...]:
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


_LOADED: list[bool] = []


def _load() -> None:
    # The metric modules register themselves on import (once: a module is imported once).
    if _LOADED:
        return
    from app.eval.scoring import generation, judged, retrieval_case, safety  # noqa: F401

    _LOADED.append(True)
