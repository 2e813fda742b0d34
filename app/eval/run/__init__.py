"""Running an evaluation: cases → pipeline → judges → metrics → checkpoint → report.

::

    from app.eval.run import RunConfig, run_sync
    outcome = run_sync(RunConfig(suite="smoke"))

The modules: :mod:`.runner` (the run), :mod:`.case` (one case, end to end),
:mod:`.observe` (the seam to the generation pipeline), :mod:`.workers` (worker processes
for a CPU-bound run), :mod:`.checkpoint` (every finished case committed, for ``--resume``)
and :mod:`.warm` (the pipeline-level warm cache of a fully cached rerun).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.faces import face_attr

if TYPE_CHECKING:
    from app.eval.config import RunConfig
    from app.eval.run.runner import RunOutcome, new_run_id, run_sync

__all__ = ["RunConfig", "RunOutcome", "new_run_id", "run_sync"]

_EXPORTS = {
    "RunConfig": "app.eval.config",
    "RunOutcome": "app.eval.run.runner",
    "new_run_id": "app.eval.run.runner",
    "run_sync": "app.eval.run.runner",
}


def __getattr__(name: str) -> Any:
    return face_attr(__name__, _EXPORTS, name)
