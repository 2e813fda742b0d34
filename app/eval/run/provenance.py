"""Where a run's numbers come from, as its report records it: the code (git) and the
knowledge base.

:func:`git_state` is the commit and whether the tree differs from it: a tracked file
changed, or an untracked file under the folders a run reads as content — the prompt
registry, the run's datasets folder and its knowledge base (an untracked prompt module is
loaded by the registry like a committed one, so a run that used it did not run the commit).
:func:`kb_ref` is the knowledge base's fingerprint (:func:`app.retrieval.kb.kb_fingerprint`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from app.eval.report.records import GitState, KbRef
from app.paths import datasets_dir, kb_dir, prompts_dir, repo_root
from app.retrieval.kb import KnowledgeBase, kb_fingerprint

__all__ = ["UNTRACKED_SHOWN", "content_dirs", "git_state", "kb_ref"]

#: untracked files a report lists at most (the count is what ``dirty`` needs)
UNTRACKED_SHOWN = 20


def content_dirs(dataset: Path | None = None, kb_root: Path | None = None) -> list[Path]:
    """The folders whose untracked files make a run's tree dirty: the prompt registry, the
    dataset's folder and the knowledge base."""
    return [
        prompts_dir(),
        dataset.parent if dataset is not None else datasets_dir(),
        kb_root if kb_root is not None else kb_dir(),
    ]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def _inside(root: Path, folder: Path) -> str | None:
    """``folder`` relative to ``root`` (posix), or None when it lies outside."""
    try:
        rel = Path(os.path.realpath(folder)).relative_to(os.path.realpath(root))
    except ValueError:
        return None
    return rel.as_posix() or "."


def git_state(root: Path | None = None, watched: Sequence[Path] | None = None) -> GitState:
    """The commit at ``root`` (the repository root) and whether the run's tree differs from
    it (see the module docstring); ``watched``: the content folders (:func:`content_dirs`).
    ``sha`` and ``dirty`` are None outside a git work tree."""
    root = root or repo_root()
    folders = content_dirs() if watched is None else watched
    try:
        sha = _git(root, "rev-parse", "HEAD").strip()
        changed = bool(_git(root, "status", "--porcelain", "--untracked-files=no").strip())
        specs = sorted({rel for f in folders if (rel := _inside(root, f)) is not None})
        untracked = (
            [
                p
                for p in _git(
                    root, "ls-files", "-z", "--others", "--exclude-standard", "--", *specs
                ).split("\0")
                if p
            ]
            if specs
            else []
        )
    except (OSError, subprocess.CalledProcessError):
        return GitState(sha=None, dirty=None)
    return GitState(
        sha=sha, dirty=changed or bool(untracked), untracked=sorted(untracked)[:UNTRACKED_SHOWN]
    )


def kb_ref(kb: KnowledgeBase, path: str) -> KbRef:
    """The report's record of ``kb`` (``path``: where it was read, as the report shows it)."""
    return KbRef.model_validate({**kb_fingerprint(kb), "path": path})
