"""Dataset versions: ``rag datasets new-version SUITE [--major]``.

Released files are never edited in place (seed 004 §11.3). A change is made in a new
version file that starts as a byte copy of the newest one: ``smoke_v1.0.jsonl`` ->
``smoke_v1.1.jsonl`` (cases added or fixed) or, with ``major``, ``smoke_v2.0.jsonl``
(cases deleted, the meaning of ``acl`` changed). Within a suite the newer version
supersedes the older: the same id in both is the same case, updated. A CHANGELOG.md stub
is appended; ``rag datasets check --changed-since`` fails until its placeholder is replaced.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.errors import DatasetError
from app.eval.datasets.candidates import read_objects
from app.eval.datasets.case import CHANGELOG_STUB, available_suites
from app.eval.datasets.store import Write, commit, digest, locked, read_file
from app.paths import datasets_dir

__all__ = [
    "CHANGELOG_STUB",
    "append_changelog",
    "append_note",
    "author",
    "case_version",
    "changelog_write",
    "content_changed",
    "is_released",
    "needs_new_version",
    "new_version",
    "next_version_name",
    "raise_versions",
    "released_cases",
    "with_entry",
    "with_note",
    "without_added_anchors",
]


def case_version(case: dict[str, Any]) -> int:
    """A case's ``version`` (1 when it has none, as seed 004 §7.2 counts from 1)."""
    value = case.get("version", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def content_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a case's content differs, ``version`` itself, bookkeeping keys (``__row__``
    of a sheet's row) and anchors only added aside."""

    def content(case: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in case.items() if k != "version" and not k.startswith("__")}

    return content(old) != content(without_added_anchors(old, new))


def without_added_anchors(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` without the anchors ``old`` did not have. Adding an anchor to a label
    (``rag datasets anchor``) records where its passage is today and changes no label, so a
    released file may gain anchors in place; changing or removing one is an edit."""
    anchors = new.get("anchors")
    if not isinstance(anchors, dict):
        return new
    before = old.get("anchors")
    before = before if isinstance(before, dict) else {}
    kept = {k: v for k, v in anchors.items() if k in before}
    out = {k: v for k, v in new.items() if k != "anchors"}
    if kept or "anchors" in old:
        out = {k: (kept if k == "anchors" else v) for k, v in new.items()}
    return out


def needs_new_version(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A case whose content changed since ``old`` and whose ``version`` was not raised."""
    return content_changed(old, new) and case_version(new) <= case_version(old)


def raise_versions(cases: list[dict[str, Any]], released: dict[str, dict[str, Any]]) -> list[str]:
    """Raise, in place, the ``version`` of every case whose content differs from the released
    case with its id (``released``: id -> case) and was not raised yet; return their ids."""
    raised = []
    for case in cases:
        old = released.get(str(case.get("id")))
        if old is not None and "__raw__" not in case and needs_new_version(old, case):
            case["version"] = case_version(old) + 1
            raised.append(str(case["id"]))
    return raised


def released_cases(
    folder: Path, suite: str, released: Callable[[Path], bool]
) -> dict[str, dict[str, Any]]:
    """Each id's case in the newest released file of ``suite`` (what a save, in the editor or
    by ``rag datasets import``, compares with to raise a changed case's ``version``)."""
    for _, path in reversed(available_suites(folder).get(suite, [])):
        if released(path):
            cases, _ = read_objects(path)
            return {str(c["id"]): c for c in cases if "__raw__" not in c and "id" in c}
    return {}


def is_released(path: Path) -> bool:
    """A dataset file is released once git tracks it; outside a git work tree every file is
    (nothing tells a draft apart there). An untracked file in a work tree is a draft: the
    editor's or an import's next version, not yet committed."""
    proc = subprocess.run(
        ["git", "ls-files", "--error-unmatch", "--", path.name],
        cwd=path.parent,
        capture_output=True,
        check=False,
    )
    if proc.returncode == 0:
        return True
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"],
        cwd=path.parent,
        capture_output=True,
        check=False,
    )
    return inside.returncode != 0


def author() -> str:
    """Who is editing: ``git config user.name``, else the login name."""
    try:
        proc = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, check=False, timeout=5
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def next_version_name(name: str, major: int, minor: int, bump_major: bool) -> tuple[str, str]:
    """``("smoke_v1.1.jsonl", "1.1")`` for ``smoke`` 1.0 (``bump_major``: ``2.0``)."""
    version = f"{major + 1}.0" if bump_major else f"{major}.{minor + 1}"
    return f"{name}_v{version}.jsonl", version


def changelog_path(folder: Path) -> Path:
    return folder / "CHANGELOG.md"


def read_changelog(folder: Path) -> tuple[str, str | None]:
    """The CHANGELOG.md text (empty when missing) and its sha256 (``None`` when missing) —
    the ``base`` of its :class:`~app.eval.datasets.store.Write`."""
    path = changelog_path(folder)
    if not os.path.lexists(path):
        return "", None
    data = read_file(path, "CHANGELOG.md")
    return data.decode("utf-8", errors="replace"), digest(data)


def with_entry(text: str, title: str, body: str) -> str:
    """``text`` (a CHANGELOG.md; empty: a new one) with ``## title`` + ``body`` appended."""
    old = text or "# Golden datasets — changelog\n"
    return old.rstrip("\n") + f"\n\n## {title}\n\n{body.rstrip()}\n"


def with_note(text: str, suite: str, version: str, note: str, *, who: str = "") -> str:
    """``text`` with ``- note`` added to the entry of ``suite v<version>`` (a later save of the
    same draft): the stub line, if still there, becomes the note. Without an entry, one is
    added. Every save's note reaches the CHANGELOG this way."""
    heading = re.compile(
        rf"(?m)^## (?:.*[ ,])?{re.escape(suite)}[ _]v{re.escape(version)}(?![\w.]).*$"
    )
    found = heading.search(text)
    line = f"- {note.strip() or CHANGELOG_STUB}"
    if found is None:
        day = dt.datetime.now(dt.UTC).date().isoformat()
        return with_entry(text, f"{suite} v{version} — {day} — {who or author()}", line)
    nxt = re.compile(r"(?m)^## ").search(text, found.end())
    end = nxt.start() if nxt else len(text)
    section = text[found.start() : end]
    stub = f"- {CHANGELOG_STUB}"
    if stub in section and note.strip():
        section = section.replace(stub, line, 1)
    else:
        section = section.rstrip("\n") + f"\n{line}\n" + ("\n" if nxt else "")
    return text[: found.start()] + section + text[end:]


def changelog_write(folder: Path, edit: Callable[[str], str]) -> Write:
    """The store write that applies ``edit`` to the folder's CHANGELOG.md as it is now
    (call under :func:`~app.eval.datasets.store.locked`)."""
    text, sha = read_changelog(folder)
    return Write(changelog_path(folder), edit(text).encode("utf-8"), sha)


def append_changelog(folder: Path, title: str, body: str) -> None:
    """Append ``## title`` + ``body`` to ``folder/CHANGELOG.md`` (created when missing)."""
    with locked(folder):
        commit(folder, [changelog_write(folder, lambda t: with_entry(t, title, body))])


def append_note(folder: Path, suite: str, version: str, note: str, *, who: str = "") -> None:
    """Add ``- note`` to the CHANGELOG.md entry of ``suite v<version>`` (:func:`with_note`)."""
    with locked(folder):
        edit = lambda t: with_note(t, suite, version, note, who=who)  # noqa: E731
        commit(folder, [changelog_write(folder, edit)])


def new_version(
    name: str,
    *,
    major: bool = False,
    root: Path | None = None,
    note: str | None = None,
    who: str | None = None,
    today: dt.date | None = None,
) -> Path:
    """Copy the newest file of suite ``name`` to the next version; return the new path."""
    folder = root or datasets_dir()
    with locked(folder):  # the newest version read and the next one written as one step
        suites = available_suites(folder)
        versions = suites.get(name)
        if not versions:
            known = ", ".join(sorted(suites)) or "none"
            raise DatasetError(f"suite '{name}' not found in {folder} — known suites: {known}")
        (cur_major, cur_minor), source = versions[-1]
        file_name, version = next_version_name(name, cur_major, cur_minor, major)
        target = folder / file_name
        if os.path.lexists(target):
            raise DatasetError(f"{target}: already exists — edit it, or pass --major")
        day = (today or dt.datetime.now(dt.UTC).date()).isoformat()
        kind = "major" if major else "minor"
        title = f"{name} v{version} — {day} — {who or author()}"
        body = f"{kind}: copied from `{source.name}`.\n\n- {note or CHANGELOG_STUB}"
        commit(
            folder,
            [
                Write(target, read_file(source), None),
                changelog_write(folder, lambda t: with_entry(t, title, body)),
            ],
        )
    return target
