"""Golden datasets: the :class:`Case` model, suites and the expert's tools.

::

    from app.eval.datasets import Case, load_suite, check_paths

The modules: :mod:`.case` (the ``Case`` model, suites, loaders), :mod:`.check`
(``rag datasets check``) with :mod:`.lines` (bytes → JSON lines), :mod:`.fields` (the model's
errors in plain words), :mod:`.meaning` (a case against the knowledge base),
:mod:`.changes` (``--changed-since``: versions and CHANGELOG), :mod:`.issues` and
:mod:`.messages` (what a check says, English and Chinese); :mod:`.versions`
(``new-version``), :mod:`.sheets` (CSV/XLSX export and import), :mod:`.mining` (candidate
cases from the answer log), :mod:`.candidates` and :mod:`.editor` (``rag datasets edit``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.faces import face_attr

if TYPE_CHECKING:
    from app.eval.datasets.case import (
        DIFFICULTIES,
        Case,
        Suite,
        available_suites,
        case_json_schema,
        load_all_suites,
        load_dataset_file,
        load_suite,
        suite_of_file,
        suite_stats,
    )
    from app.eval.datasets.check import check_paths
    from app.eval.datasets.versions import new_version

__all__ = [
    "DIFFICULTIES",
    "Case",
    "Suite",
    "available_suites",
    "case_json_schema",
    "check_paths",
    "load_all_suites",
    "load_dataset_file",
    "load_suite",
    "new_version",
    "suite_of_file",
    "suite_stats",
]

_EXPORTS = {
    "Case": "app.eval.datasets.case",
    "DIFFICULTIES": "app.eval.datasets.case",
    "Suite": "app.eval.datasets.case",
    "available_suites": "app.eval.datasets.case",
    "case_json_schema": "app.eval.datasets.case",
    "check_paths": "app.eval.datasets.check",
    "load_all_suites": "app.eval.datasets.case",
    "load_dataset_file": "app.eval.datasets.case",
    "load_suite": "app.eval.datasets.case",
    "new_version": "app.eval.datasets.versions",
    "suite_of_file": "app.eval.datasets.case",
    "suite_stats": "app.eval.datasets.case",
}


def __getattr__(name: str) -> Any:
    return face_attr(__name__, _EXPORTS, name)
