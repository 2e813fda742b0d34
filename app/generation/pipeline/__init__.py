"""The RAG pipeline: question + history → injection check → rewrite → ACL-filtered retrieval →
score-aware assembly → summary memory → model → citations → :class:`Answer` with a trace.

Public names (imported lazily, so ``import app.generation.pipeline.safety`` stays cheap)::

    from app.generation.pipeline import Pipeline, PipelineConfig, Answer, Trace

The parts: :mod:`.generator` (the ``Pipeline``), :mod:`.config`, :mod:`.rewrite`,
:mod:`.memory`, :mod:`.assembly`, :mod:`.safety`, :mod:`.citations`, :mod:`.trace`,
:mod:`.answer_log`. The prompts it renders come from :mod:`app.generation.registry`.
"""

from __future__ import annotations

from typing import Any

from app.faces import face_attr

__all__ = ["Answer", "Pipeline", "PipelineConfig", "Trace", "generate"]

_EXPORTS = {
    "Answer": "app.generation.pipeline.trace",
    "Pipeline": "app.generation.pipeline.generator",
    "PipelineConfig": "app.generation.pipeline.config",
    "Trace": "app.generation.pipeline.trace",
    "generate": "app.generation.pipeline.generator",
}


def __getattr__(name: str) -> Any:
    return face_attr(__name__, _EXPORTS, name)
