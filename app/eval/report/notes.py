"""Notes every table built from a run must carry about the models it used.

* :func:`unlisted_note` — the run rendered prompts for a model outside their
  ``APPLICABLE_MODELS`` (``--allow-unlisted-model``): its numbers are for a model the prompt
  was not written for, and every table built from the run says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["unlisted_note", "unlisted_pairs"]


def unlisted_pairs(meta: Any) -> list[Mapping[str, str]]:
    """``meta.unlisted_models`` of a typed :class:`~app.eval.report.records.RunMeta` or its JSON."""
    pairs = meta.get("unlisted_models") if isinstance(meta, Mapping) else meta.unlisted_models
    return [p for p in pairs or [] if isinstance(p, Mapping)]


def unlisted_note(meta: Any, label: str = "") -> str | None:
    """One sentence naming each model and the prompts that do not list it, or ``None``."""
    pairs = unlisted_pairs(meta)
    if not pairs:
        return None
    by_model: dict[str, set[str]] = {}
    for p in pairs:
        by_model.setdefault(str(p.get("model")), set()).add(str(p.get("prompt")))
    parts = [
        f"`{m}` is outside APPLICABLE_MODELS of {', '.join(sorted(ps))}"
        for m, ps in by_model.items()
    ]
    prefix = f"{label}: " if label else ""
    return f"⚠️ {prefix}run with --allow-unlisted-model — " + "; ".join(parts)
