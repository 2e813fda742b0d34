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
import subprocess
from pathlib import Path

from app.errors import DatasetError
from app.eval.datasets.case import CHANGELOG_STUB, available_suites
from app.paths import datasets_dir

__all__ = ["CHANGELOG_STUB", "author", "new_version", "next_version_name"]


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


def append_changelog(folder: Path, title: str, body: str) -> None:
    """Append ``## title`` + ``body`` to ``folder/CHANGELOG.md`` (created when missing)."""
    path = folder / "CHANGELOG.md"
    old = path.read_text(encoding="utf-8") if path.exists() else "# Golden datasets — changelog\n"
    text = old.rstrip("\n") + f"\n\n## {title}\n\n{body.rstrip()}\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
    suites = available_suites(folder)
    versions = suites.get(name)
    if not versions:
        known = ", ".join(sorted(suites)) or "none"
        raise DatasetError(f"suite '{name}' not found in {folder} — known suites: {known}")
    (cur_major, cur_minor), source = versions[-1]
    file_name, version = next_version_name(name, cur_major, cur_minor, major)
    target = folder / file_name
    try:
        with target.open("xb") as fh:  # never overwrites
            fh.write(source.read_bytes())
    except FileExistsError:
        raise DatasetError(f"{target}: already exists — edit it, or pass --major") from None
    day = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    kind = "major" if major else "minor"
    append_changelog(
        folder,
        f"{name} v{version} — {day} — {who or author()}",
        f"{kind}: copied from `{source.name}`.\n\n- {note or CHANGELOG_STUB}",
    )
    return target
