"""Statistics of per-case values: distributions and paired significance.

:mod:`.describe` (a metric's distribution: mean, quantiles, histogram, bootstrap CI),
:mod:`.significance` (the paired tests a comparison runs: Wilcoxon, bootstrap, McNemar,
Brown–Forsythe) and :mod:`.distributions` (those tests' distributions in plain Python, to
scipy's formulas, so a comparison need not import ``scipy.stats``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.faces import face_attr

if TYPE_CHECKING:
    from app.eval.stats.describe import bootstrap_ci, describe, histogram, stable_seed

__all__ = ["bootstrap_ci", "describe", "histogram", "stable_seed"]

_EXPORTS = {
    "bootstrap_ci": "app.eval.stats.describe",
    "describe": "app.eval.stats.describe",
    "histogram": "app.eval.stats.describe",
    "stable_seed": "app.eval.stats.describe",
}


def __getattr__(name: str) -> Any:
    return face_attr(__name__, _EXPORTS, name)
