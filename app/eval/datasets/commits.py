"""Editor saves reviewed like code: each save is a git commit by the expert, on a branch named
for the expert's change, ready for a pull request (seed 004 §11.3: a dataset change needs a
business expert's approval; DESIGN "Experts' changes are reviewed like code").

* **Who**: the expert's name and email, asked once by the editor and kept in the checkout's
  own git config (``rag.expertName`` / ``rag.expertEmail`` in ``.git/config``: local, never
  committed, never a global setting). Author and committer of every save are the expert.
* **Where**: a branch ``datasets/<suite>-v<version>-<who>`` made from the checkout's branch at
  the first save (the working tree is kept as it is); later saves of the same change commit
  there. Only the saved dataset file and ``CHANGELOG.md`` go into the commit (``git commit --
  paths``), whatever else is staged.
* **Released**: a dataset file is released when the *base* branch (the branch the editor was
  started on; ``main`` when it was started on a change branch) has it. A draft committed on the
  change branch stays a draft until the pull request is merged.
* **Pull request**: with the GitHub CLI (``gh``) on ``PATH`` one click runs ``git push`` and
  ``gh pr create``; without it the page shows the exact commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Expert", "GitSaves", "PullRequest", "SavedCommit", "git_saves"]

_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$")
_NAME_KEY, _EMAIL_KEY = "rag.expertName", "rag.expertEmail"


class GitError(Exception):
    """A git command failed; the message is git's own first line plus what was asked."""


@dataclass(frozen=True)
class Expert:
    name: str
    email: str

    @property
    def slug(self) -> str:
        """A branch-safe short name: the email's local part."""
        local = self.email.split("@", 1)[0].lower()
        return re.sub(r"[^a-z0-9]+", "-", local).strip("-") or "expert"


@dataclass(frozen=True)
class SavedCommit:
    branch: str
    sha: str
    author: str
    message: str


@dataclass(frozen=True)
class PullRequest:
    branch: str
    base: str
    commands: tuple[str, ...]  # what to run by hand (always given)
    url: str | None = None  # set when gh created it
    gh: bool = False


def _run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitError(f"git {' '.join(args[:2])}: {exc}") from None
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        raise GitError(f"git {' '.join(args[:2])}: {first[0] if first else 'failed'}")
    return proc.stdout.strip()


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@dataclass
class GitSaves:
    """The git side of the editor for the work tree at ``root``."""

    root: Path
    base: str  # the branch that holds the released files

    # ------------------------------------------------------------------ who
    def expert(self) -> Expert | None:
        try:
            name = _run(self.root, "config", "--local", "--get", _NAME_KEY)
            email = _run(self.root, "config", "--local", "--get", _EMAIL_KEY)
        except GitError:
            return None
        return Expert(name, email) if name and email else None

    def set_expert(self, name: str, email: str) -> Expert:
        name, email = name.strip(), email.strip()
        if not name or len(name) > 100 or "\n" in name or "<" in name or ">" in name:
            raise ValueError("name")
        if not _EMAIL.match(email) or len(email) > 200:
            raise ValueError("email")
        _run(self.root, "config", "--local", _NAME_KEY, name)
        _run(self.root, "config", "--local", _EMAIL_KEY, email)
        return Expert(name, email)

    # ------------------------------------------------------------------ released
    def released(self, path: Path) -> bool:
        """Whether the base branch has ``path`` (a file only on the change branch is a draft)."""
        rel = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        proc = subprocess.run(
            ["git", "cat-file", "-e", f"{self.base}:{rel}"],
            cwd=self.root,
            capture_output=True,
            check=False,
        )
        return proc.returncode == 0

    def branch(self) -> str:
        return _run(self.root, "rev-parse", "--abbrev-ref", "HEAD")

    # ------------------------------------------------------------------ commit
    def commit(
        self, expert: Expert, suite: str, version: str, files: list[Path], note: str
    ) -> SavedCommit:
        """Commit ``files`` as ``expert`` on the change branch (made here at the first save)."""
        branch = f"datasets/{suite}-v{version}-{expert.slug}"
        if self.branch() != branch:
            exists = subprocess.run(
                ["git", "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"],
                cwd=self.root,
                check=False,
            )
            _run(self.root, "switch", *([] if exists.returncode == 0 else ["-c"]), branch)
        rels = [Path(f).resolve().relative_to(self.root.resolve()).as_posix() for f in files]
        _run(self.root, "add", "--", *rels)
        first = note.strip().splitlines()[0][:72] if note.strip() else "edited"
        message = f"datasets: {suite} v{version} — {first}\n\nSaved in `rag datasets edit`.\n"
        who = f"{expert.name} <{expert.email}>"
        env = {
            **_git_env(),
            "GIT_AUTHOR_NAME": expert.name,
            "GIT_AUTHOR_EMAIL": expert.email,
            "GIT_COMMITTER_NAME": expert.name,
            "GIT_COMMITTER_EMAIL": expert.email,
        }
        staged = subprocess.run(
            ["git", "diff", "--cached", "--quiet", "--", *rels], cwd=self.root, check=False
        )
        if staged.returncode == 0:  # nothing changed since the last commit of these files
            return SavedCommit(branch, _run(self.root, "rev-parse", "HEAD"), who, "")
        _run(self.root, "commit", "-q", "--no-verify", "-m", message, "--", *rels, env=env)
        return SavedCommit(branch, _run(self.root, "rev-parse", "HEAD"), who, message)

    # ------------------------------------------------------------------ pull request
    def pull_request(self, title: str, body: str, *, create: bool) -> PullRequest:
        branch = self.branch()
        if branch == self.base or branch == "HEAD":
            raise GitError("no change branch yet: save first")
        commands = (
            f"git push -u origin {branch}",
            f"gh pr create --base {self.base} --head {branch} --title {_quote(title)} "
            f"--body {_quote(body)}",
        )
        gh = shutil.which("gh")
        if not create or gh is None:
            return PullRequest(branch, self.base, commands, gh=gh is not None)
        _run(self.root, "push", "-u", "origin", branch)
        try:
            proc = subprocess.run(
                [gh, "pr", "create", "--base", self.base, "--head", branch, "--title", title,
                 "--body", body],
                cwd=self.root, capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            raise GitError(f"gh pr create: {exc}") from None
        if proc.returncode != 0:
            first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
            raise GitError(f"gh pr create: {first[0] if first else 'failed'}")
        url = next((w for w in proc.stdout.split() if w.startswith("http")), None)
        return PullRequest(branch, self.base, commands, url=url, gh=True)


def _git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def git_saves(folder: Path) -> GitSaves | None:
    """The git side for a datasets ``folder`` inside a work tree (``None`` outside one)."""
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    root = Path(proc.stdout.strip())
    branch = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    base = branch
    if branch.startswith("datasets/") or branch in {"", "HEAD"}:
        for candidate in ("main", "master"):
            ok = subprocess.run(
                ["git", "show-ref", "--verify", "--quiet", f"refs/heads/{candidate}"],
                cwd=root,
                check=False,
            )
            if ok.returncode == 0:
                base = candidate
                break
    return GitSaves(root=root, base=base or "HEAD")
