"""Mined candidates in the browser editor (issue 17, item 4).

``rag datasets mine`` writes ``mined_<UTC>.jsonl`` under ``reports/candidates/`` (never into
a suite, :func:`app.eval.datasets.mining.write_candidates`): one candidate a line, a case's fields plus
what the mining knows (:data:`MINING_FIELDS`: the rules that fired, their evidence, the
logged answer, the trace ids). The editor opens such a file, checks each candidate *as a
case of the suite it would join* with ``rag datasets check``'s own checker (line numbers are
the candidate file's, ids are checked against every suite), and accepts a reviewed one into
a suite through the editor's ordinary save (next version + CHANGELOG entry when the suite's
newest file is released). The accepted candidate stays in its file, marked
``"status": "accepted"`` with ``accepted_into`` (the file it went to), so it is not accepted
twice; its mining fields never reach the suite. A candidate can also be rejected
(``"status": "rejected"`` with ``rejected_reason``), or its review edits saved in its own file
without accepting it; an accepted candidate's line is never rewritten by either.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from app.eval.datasets.case import iter_lines
from app.eval.datasets.store import read_file

MINING_FIELDS = frozenset(
    {
        "status",
        "suggested_suite",
        "rules",
        "evidence",
        "trace_ids",
        "logged_answer",
        "mined_from",
        "mined_at",
        "accepted_into",
        "rejected_reason",
    }
)
ACCEPTED = "accepted"
REJECTED = "rejected"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.jsonl$")


def as_case(candidate: dict[str, Any]) -> dict[str, Any]:
    """The case a candidate becomes: its fields without the mining ones (an unknown field
    stays, so that the checker names it)."""
    if "__raw__" in candidate:
        return candidate
    return {k: v for k, v in candidate.items() if k not in MINING_FIELDS}


def is_accepted(candidate: dict[str, Any]) -> bool:
    return candidate.get("status") == ACCEPTED


def is_reviewed(candidate: dict[str, Any]) -> bool:
    """Accepted or rejected: nothing left to review (a rejected one may still be accepted)."""
    return candidate.get("status") in (ACCEPTED, REJECTED)


def candidate_files(folder: Path | None) -> list[dict[str, Any]]:
    """The candidate files in ``folder``, newest first, with how many are left to review."""
    if folder is None or not folder.is_dir():
        return []
    rows = []
    for path in sorted(folder.glob("*.jsonl"), reverse=True):
        if not path.is_file() or not _NAME.match(path.name):
            continue
        cases = read_objects(path)[0]
        rows.append(
            {
                "name": path.name,
                "candidates": len(cases),
                "pending": sum(1 for c in cases if not is_reviewed(c)),
            }
        )
    return rows


def candidate_path(folder: Path | None, name: str) -> Path:
    """The file ``name`` in ``folder`` (a bare ``*.jsonl`` name; KeyError otherwise)."""
    if folder is None or not _NAME.match(name) or not (folder / name).is_file():
        raise KeyError(name)
    return folder / name


def read_objects(path: Path) -> tuple[list[dict[str, Any]], str]:
    """A JSONL file's objects, as the editor shows them (a line that is no JSON object:
    ``{"__raw__": line}``; blank lines skipped), and the file's sha256. A FIFO, device or
    folder named like one is refused (:class:`~app.safe_io.UnsafeInput`), never opened."""
    data = read_file(path)
    cases: list[dict[str, Any]] = []
    for _, line in iter_lines(data.decode("utf-8", errors="replace")):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            obj = None
        cases.append(obj if isinstance(obj, dict) else {"__raw__": line})
    return cases, hashlib.sha256(data).hexdigest()


def render_candidates(cases: list[dict[str, Any]]) -> str:
    """The candidate file's text, written the way ``rag datasets mine`` writes it."""
    return "".join(
        (
            c["__raw__"]
            if isinstance(c.get("__raw__"), str)
            else json.dumps(c, ensure_ascii=False, sort_keys=True)
        )
        + "\n"
        for c in cases
    )
