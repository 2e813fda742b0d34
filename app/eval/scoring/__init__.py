"""Metrics: stateless functions of (case, observation, context) → :class:`Score`.

``from app.eval.scoring import retrieval`` is the public retriever API (trec_eval
definitions); :func:`specs` and :func:`score_case` are the registry the harness uses.
"""

from app.eval.scoring import retrieval
from app.eval.scoring.base import MetricContext, MetricSpec, Observation, Score, normalise
from app.eval.scoring.registry import REGISTRY, metric, score_case, specs

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
