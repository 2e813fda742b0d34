"""Metrics: stateless functions of (case, observation, context) → :class:`Score`.

::

    from app.eval.scoring import retrieval          # the retriever metrics (trec_eval definitions)
    from app.eval.scoring import score_case, specs  # the table the harness reads

The modules: :mod:`.base` (the nouns: ``Score``, ``MetricSpec``, ``Observation``,
``MetricContext``), :mod:`.registry` (the one table of metrics and the :func:`metric` and
:func:`~app.eval.scoring.registry.judge_metric` decorators that fill it), :mod:`.table` (the
table as the harness reads it, built-in metrics loaded),
the built-in metrics (:mod:`.retrieval_case`, :mod:`.generation`, :mod:`.judged`,
:mod:`.safety`), :mod:`.judges` (asking a judge), :mod:`.thresholds` and :mod:`.calibrate`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from app.faces import face_attr

if TYPE_CHECKING:
    from app.eval.scoring import retrieval
    from app.eval.scoring.base import MetricContext, MetricSpec, Observation, Score, normalise
    from app.eval.scoring.registry import REGISTRY, metric
    from app.eval.scoring.table import score_case, specs

__all__ = [
    "REGISTRY",
    "MetricContext",
    "MetricSpec",
    "Observation",
    "Score",
    "metric",
    "normalise",
    "retrieval",
    "score_case",
    "specs",
]

_EXPORTS = {
    "MetricContext": "app.eval.scoring.base",
    "MetricSpec": "app.eval.scoring.base",
    "Observation": "app.eval.scoring.base",
    "REGISTRY": "app.eval.scoring.registry",
    "Score": "app.eval.scoring.base",
    "metric": "app.eval.scoring.registry",
    "normalise": "app.eval.scoring.base",
    "score_case": "app.eval.scoring.table",
    "specs": "app.eval.scoring.table",
}


def __getattr__(name: str) -> Any:
    if name == "retrieval":  # a module of the package
        return importlib.import_module(f"{__name__}.retrieval")
    return face_attr(__name__, _EXPORTS, name)
