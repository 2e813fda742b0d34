"""``rag datasets check --changed-since REV`` (seed 004 §11.3): a changed dataset needs a
new version and a CHANGELOG.md entry naming it (not the stub ``new-version`` writes), a
file that existed at ``REV`` is released: it must not be edited in place or deleted, and a
case whose content changed since ``REV`` raises its own ``version`` (seed 004 §7.2)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from app.errors import DatasetError
from app.eval.datasets.case import CHANGELOG_STUB, iter_lines, parse_file_name
from app.eval.datasets.issues import CheckResult, Sink, display, show
from app.eval.datasets.versions import case_version, needs_new_version, without_added_anchors

__all__ = ["check_changed_since", "git"]


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _first_difference(old: str, new: str) -> int:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for n, (a, b) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if a != b:
            return n
    return min(len(old_lines), len(new_lines)) + 1


def _entry(changelog: str, name: str, version: str) -> str | None:
    """The text of the CHANGELOG section whose heading names ``name v<version>``."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(name)}[ _]v{re.escape(version)}(?![\w.])")
    sections = re.split(r"(?m)^(?=## )", changelog)
    for section in sections:
        heading = section.split("\n", 1)[0]
        if heading.startswith("## ") and pattern.search(heading):
            return section
    return None


def _cases(text: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for number, line in iter_lines(text):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue  # the line check reports it
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            out.append((number, obj))
    return out


def _released_cases(root: Path, rev: str, rel: str, suite: str) -> dict[str, dict[str, Any]]:
    """Each id's case as the suite had it at ``rev`` (a newer version file wins)."""
    names = git(root, "ls-tree", "--name-only", f"{rev}:{rel}").stdout.split()
    files = sorted(
        (parsed[1], parsed[2], name)
        for name in names
        if (parsed := parse_file_name(name)) is not None and parsed[0] == suite
    )
    cases: dict[str, dict[str, Any]] = {}
    for _, _, name in files:
        old = git(root, "show", f"{rev}:{rel}/{name}")
        if old.returncode == 0:
            cases.update((str(obj["id"]), obj) for _, obj in _cases(old.stdout))
    return cases


def _check_case_versions(root: Path, rev: str, rel: str, name: str, result: CheckResult) -> None:
    path = root / name
    parsed = parse_file_name(path.name)
    if parsed is None or not path.exists():
        return
    before = _released_cases(root, rev, rel, parsed[0])
    sink = Sink(display(path), result)
    for number, case in _cases(path.read_text(encoding="utf-8", errors="replace")):
        old = before.get(str(case["id"]))
        if old is not None and needs_new_version(old, case):
            sink.add(
                number,
                "version",
                "version-not-raised",
                code="version-not-raised",
                value=show(case["id"]),
                rev=rev,
                version=case_version(case),
                next=case_version(old) + 1,
            )


def _only_anchors_added(old: str, new: str) -> bool:
    """Whether ``new`` is ``old`` with anchors added to labels and nothing else changed
    (:func:`~app.eval.datasets.versions.without_added_anchors`), line for line."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    if len(old_lines) != len(new_lines):
        return False
    for a, b in zip(old_lines, new_lines, strict=True):
        if a == b:
            continue
        try:
            oa, nb = json.loads(a), json.loads(b)
        except (ValueError, RecursionError):
            return False
        if not (isinstance(oa, dict) and isinstance(nb, dict)):
            return False
        if list(without_added_anchors(oa, nb).items()) != list(oa.items()):
            return False
    return True


def check_changed_since(rev: str, folder: Path, result: CheckResult) -> None:
    """The seed 004 §11.3 rules against git revision ``rev``."""
    top = git(folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise DatasetError(f"{folder}: not inside a git repository — --changed-since needs git")
    root = Path(top.stdout.strip())
    if git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        raise DatasetError(
            f"--changed-since {rev}: unknown git revision — use a branch, tag or commit"
        )
    rel = folder.resolve().relative_to(root.resolve()).as_posix()
    changed = set(git(root, "diff", "--name-only", rev, "--", rel).stdout.split())
    changed |= set(
        git(root, "ls-files", "--others", "--exclude-standard", "--", rel).stdout.split()
    )
    datasets = sorted(p for p in changed if p.endswith(".jsonl"))
    changelog = f"{rel}/CHANGELOG.md"
    log_sink = Sink(display(root / changelog), result)
    if datasets and changelog not in changed:
        names = ", ".join(Path(p).name for p in datasets)
        log_sink.add(None, "", "changelog", code="changelog", rev=rev, names=names)
    elif datasets:
        try:
            text = (root / changelog).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        for name in datasets:
            parsed = parse_file_name(Path(name).name)
            if parsed is None or not (root / name).exists():
                continue
            title = f"{parsed[0]} v{parsed[1]}.{parsed[2]}"
            section = _entry(text, parsed[0], f"{parsed[1]}.{parsed[2]}")
            if section is None:
                log_sink.add(
                    None,
                    "",
                    "changelog.entry",
                    code="changelog",
                    file=Path(name).name,
                    title=title,
                )
            elif CHANGELOG_STUB in section:
                log_sink.add(None, "", "changelog.stub", code="changelog", title=title)
    for name in datasets:
        _check_case_versions(root, rev, rel, name, result)
        old = git(root, "show", f"{rev}:{name}")
        if old.returncode != 0:
            continue  # a new file: fine
        path = root / name
        sink = Sink(display(path), result)
        if not path.exists():
            sink.add(None, "", "released-deleted", code="released-edited", rev=rev, name=name)
            continue
        new = path.read_text(encoding="utf-8", errors="replace")
        if new == old.stdout or _only_anchors_added(old.stdout, new):
            continue
        parsed = parse_file_name(path.name)
        if parsed is None:
            continue  # the file name error is reported by the file check
        suite, major, minor = parsed
        sink.add(
            _first_difference(old.stdout, new),
            "",
            "released-edited",
            code="released-edited",
            rev=rev,
            name=name,
            suite=suite,
            minor=f"{suite}_v{major}.{minor + 1}.jsonl",
            major=f"{suite}_v{major + 1}.0.jsonl",
        )
