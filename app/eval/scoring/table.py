"""The metric table as the harness reads it: every registered metric, the built-in ones
always among them.

The built-in metric modules are imported here, so whoever reads the table has them; the
registry (:mod:`app.eval.scoring.registry`) is only the writing side and imports none.
:func:`specs` is the report order, :func:`select_metrics` what ``--metrics`` names,
:func:`score_case` runs every selected metric on one case and never raises for a metric
that does not apply (it returns a ``null`` score with a reason instead), and
:func:`judge_table` lists the judge metrics (each one's prompt, variables builder and
offline rule: the entries of the one table, :mod:`app.eval.scoring.registry`). Importing
this module hands ``offline:reference-judge`` those offline rules through its public seam
(:func:`app.baselines.reference_judge.use_rules`): the rules live with their judges.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType

from app.baselines import reference_judge
from app.errors import ConfigError
from app.eval.datasets.case import Case

# the built-in metrics register themselves on import; registration order = report order
# within a group (the deterministic generation metrics before the judge metrics)
from app.eval.scoring import generation, judged, retrieval_case, safety  # noqa: F401
from app.eval.scoring.base import Kind, MetricContext, MetricSpec, Observation, Score
from app.eval.scoring.registry import REGISTRY, JudgeMetric, version

GROUP_ORDER = ("retrieval", "generation", "rewrite", "safety", "cost")


class _Table:
    """The report order of :data:`REGISTRY` at one version (with its length: a direct
    ``REGISTRY.pop`` is noticed too) and what is derived from it."""

    __slots__ = ("judges", "key", "offline", "red_lines", "selections", "specs")

    def __init__(self, key: tuple[int, int]) -> None:
        self.key = key
        order = sorted(REGISTRY, key=lambda n: GROUP_ORDER.index(REGISTRY[n].spec.group))
        self.specs = {name: REGISTRY[name].spec for name in order}
        self.red_lines = tuple(n for n, s in self.specs.items() if s.red_line)
        self.selections: dict[tuple[str, ...], tuple[str, ...]] = {}
        # in registration order
        self.judges = {n: e.judge for n, e in REGISTRY.items() if e.judge is not None}
        self.offline: Mapping[str, reference_judge.OfflineRule] = MappingProxyType(
            {n: j.offline for n, j in self.judges.items()}
        )


_TABLE: list[_Table] = []


def _table() -> _Table:
    key = version()
    if not _TABLE or _TABLE[0].key != key:
        _TABLE[:] = [_Table(key)]
    return _TABLE[0]


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
        name: REGISTRY[name].fn(case, obs, ctx)
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


def judge_table() -> dict[str, JudgeMetric]:
    """Every judge metric, in registration order."""
    return dict(_table().judges)


def judge(name: str) -> JudgeMetric:
    table = judge_table()
    if name not in table:
        raise KeyError(f"unknown judge metric {name!r}; known: {', '.join(table)}")
    return table[name]


def offline_rules() -> Mapping[str, reference_judge.OfflineRule]:
    """Each judge metric's offline rule (what ``offline:reference-judge`` answers)."""
    return _table().offline


reference_judge.use_rules(offline_rules)
