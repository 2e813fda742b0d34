"""The offline baselines: deterministic algorithms served as providers.

``offline:extractive`` answers from the retrieved context (:mod:`.extractive`), and the
pipeline's rewrite and summary prompts (:mod:`.tasks`, :mod:`.replies`);
``offline:reference-judge`` scores a judge prompt against the golden answer
(:mod:`.reference_judge`). They need no network and no key, and every report names them as
baselines: their numbers are never a model's.
"""

from __future__ import annotations

from app.llm.providers import register_provider

__all__ = ["register"]

_OFFLINE_HELP = "deterministic baselines, no network or key"


def register() -> None:
    """Register ``offline:extractive`` and ``offline:reference-judge`` through the public
    seam a third-party provider uses; idempotent, and it loads neither module (their
    classes are imported when first used). Importing :mod:`app.baselines` calls it."""
    register_provider(
        "offline:extractive", "app.baselines.extractive:ExtractiveProvider", _OFFLINE_HELP
    )
    register_provider(
        "offline:reference-judge",
        "app.baselines.reference_judge:ReferenceJudgeProvider",
        _OFFLINE_HELP,
    )


register()
