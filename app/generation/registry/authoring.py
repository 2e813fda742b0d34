"""Authoring operations on a prompts tree: new version, rollback, lock, prune (seed 004 §4)."""

from __future__ import annotations

import ast
import getpass
import re
import subprocess
import tomllib
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from app.errors import PromptError
from app.generation.registry import PromptRegistry
from app.generation.registry.checks import rollout_problems
from app.generation.registry.header import HEADER_KEYS
from app.generation.registry.loader import PromptSpec
from app.generation.registry.releases import (
    RELEASES_FILE,
    Release,
    Rollout,
    add_release,
    parse_version,
    set_active,
    set_fallback,
    set_rollout,
    utc_iso,
    write_lock,
)
from app.generation.registry.rollout import Stage, plan_of
from app.paths import datasets_dir

PRUNE_AFTER_DAYS = 30
_NAMED_VERSION = re.compile(r"^[a-z][a-z0-9_]*/[a-z][a-z0-9_]*_v[1-9][0-9]*$")


def lock(reg: PromptRegistry, extra: tuple[str, ...] = ()) -> tuple[dict[str, str], list[str]]:
    """Record the hash of every released (active, fallback or rollout candidate) version;
    keep earlier entries
    whose files still exist. Returns the new lock and the ids newly added or changed."""
    hashes = {qid: h for qid, h in reg.lock.items() if _exists(reg, qid)}
    changed: list[str] = []
    for pid in sorted({*reg.releases.entries, *reg.prompt_ids()}):
        rel = reg.release(pid)
        if rel is None:
            continue
        candidate = rel.rollout.candidate if rel.rollout is not None else None
        for ver in {rel.active, rel.fallback, candidate} - {None}:
            spec = reg.versions(pid).get(ver or 0)
            if spec is None:
                continue
            if hashes.get(spec.qualified) != spec.content_hash:
                changed.append(spec.qualified)
            hashes[spec.qualified] = spec.content_hash
    for name in extra:  # versions named to release them as a rollout candidate
        if _NAMED_VERSION.match(name.strip()) is None:
            raise PromptError(f"{name!r}: name an exact version, e.g. system/kb_qa_v3")
        spec = reg.get(name)
        bad = [v for v in reg.module(spec).violations]
        if bad:
            codes = ", ".join(sorted({v.code for v in bad}))
            raise PromptError(
                f"{spec.qualified} has violations ({codes}); fix them (`rag prompts check`) "
                "before locking it"
            )
        if hashes.get(spec.qualified) != spec.content_hash:
            changed.append(spec.qualified)
        hashes[spec.qualified] = spec.content_hash
    write_lock(reg.root, hashes)
    return hashes, sorted(changed)


def _exists(reg: PromptRegistry, qid: str) -> bool:
    cat, _, name = qid.partition("/")
    return (reg.root / cat / f"{name}.py").exists()


def _latest(reg: PromptRegistry, name: str) -> PromptSpec:
    pid = re.sub(r"_v\d+$", "", name.strip().removesuffix(".py"))
    versions = reg.versions(pid)
    if not versions:
        raise PromptError(f"unknown prompt {pid!r}; known prompts: {', '.join(reg.prompt_ids())}")
    return versions[max(versions)]


def new_version(
    reg: PromptRegistry, name: str, *, today: date | None = None, author: str | None = None
) -> Path:
    """Copy the latest version of ``name`` to ``<slug>_v<N+1>.py`` with VERSION, header
    version, 最近修改/Modified date and a changelog line bumped; the old file is untouched.

    A prompt released without a ``releases.toml`` entry (its one version) gets the entry,
    naming that version active and fallback: the new version is not live until a change
    sets ``active``."""
    spec = _latest(reg, name)
    today = today or date.today()
    author = author or getpass.getuser()
    n = spec.version + 1
    src = spec.path.read_text(encoding="utf-8")
    target = spec.path.with_name(f"{spec.slug}_v{n}.py")
    if target.exists():
        raise PromptError(f"{target} already exists; edit it or remove it first")
    tree = ast.parse(src)
    first = tree.body[0] if tree.body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
        and first.end_lineno is not None
    ):
        raise PromptError(f"{spec.path} has no docstring header to copy; fix it first")
    lines = src.splitlines(keepends=True)
    doc_start, doc_end = first.lineno - 1, first.end_lineno
    zh = any(line.startswith("版本") for line in lines[doc_start:doc_end])

    def key_re(field: str) -> re.Pattern[str]:
        return re.compile(rf"^(\s*(?:{'|'.join(HEADER_KEYS[field])})\s*)([:：])\s*(.*)$")

    stamp = f"{author} ({today.isoformat()})"
    region: list[str] = []
    saw_modified, skipping = False, False
    for line in lines[doc_start:doc_end]:
        if skipping and line.strip().startswith("-"):
            continue
        skipping = False
        if key_re("baselines").match(line):
            skipping = True  # a baseline belongs to the version it measured
            continue
        if (m := key_re("version").match(line)) and re.fullmatch(r"v\d+", m.group(3).strip()):
            line = f"{m.group(1)}{m.group(2)} v{n}\n"
        elif m := key_re("modified").match(line):
            saw_modified = True
            line = f"{m.group(1)}{m.group(2)} {stamp}\n"
        elif (m := key_re("changes").match(line)) and not m.group(3).strip():
            if not saw_modified:
                region.append(f"{'最近修改' if zh else 'Modified'}: {stamp}\n")
                saw_modified = True
            what = "TODO 描述本次变更" if zh else "TODO describe the change"
            region += [line, f"- v{n} ({today.isoformat()}): {what}\n"]
            continue
        region.append(line)
    body = "".join(lines[doc_end:])
    body = re.sub(
        rf'^(VERSION\s*=\s*)"{re.escape(spec.name)}"',
        rf'\g<1>"{spec.slug}_v{n}"',
        body,
        count=1,
        flags=re.M,
    )
    out = [*lines[:doc_start], *region, body]
    target.write_text("".join(out), encoding="utf-8")
    if spec.prompt_id not in reg.releases.entries and not reg.releases.problems:
        add_release(reg.root, spec.prompt_id, spec.version)
    return target


def rollback(reg: PromptRegistry, name: str) -> tuple[str, int, int, str, str]:
    """Make the fallback active in releases.toml. Returns (prompt id, old, new, old line, new line)."""
    pid = re.sub(r"_v\d+$", "", name.strip())
    rel = reg.release(pid)
    if rel is None or rel.fallback is None or rel.active is None:
        raise PromptError(f"{pid} has no active/fallback entry in {reg.root / RELEASES_FILE}")
    if rel.active == rel.fallback:
        raise PromptError(
            f"{pid}: active is already the fallback v{rel.fallback}; nothing to roll back to "
            f"(set another fallback in {RELEASES_FILE} first)"
        )
    if rel.fallback not in reg.versions(pid):
        raise PromptError(f"{pid}: fallback v{rel.fallback} has no module; cannot roll back")
    old_line, new_line = set_active(reg.root, pid, rel.fallback)
    return pid, rel.active, rel.fallback, old_line, new_line


@dataclass(frozen=True)
class PruneDecision:
    qualified: str
    deletable: bool
    reasons: tuple[str, ...]


def _git_releases_history(root: Path) -> list[tuple[date, dict[str, int]]]:
    """(commit date, active version per prompt) for every commit that touched releases.toml."""
    try:
        log = subprocess.run(
            ["git", "log", "--format=%H %cs", "--", RELEASES_FILE],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if log.returncode != 0:
        return []
    out: list[tuple[date, dict[str, int]]] = []
    for row in log.stdout.splitlines():
        sha, _, day = row.partition(" ")
        show = subprocess.run(
            ["git", "show", f"{sha}:./{RELEASES_FILE}"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if show.returncode != 0:
            continue
        try:
            prompts = tomllib.loads(show.stdout).get("prompts", {})
        except tomllib.TOMLDecodeError:
            continue
        active = {
            pid: v
            for pid, t in prompts.items()
            if isinstance(t, dict) and (v := parse_version(t.get("active"))) is not None
        }
        out.append((date.fromisoformat(day), active))
    return out


def prune(
    reg: PromptRegistry, *, today: date | None = None, datasets: Path | None = None
) -> list[PruneDecision]:
    """Seed 004 §4.4: an old version may go when superseded ≥ 30 days (changelog dates), not
    rolled back to since (releases.toml history), and nothing points at it (releases, cases)."""
    today = today or date.today()
    ds_dir = datasets or datasets_dir()
    case_text = "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in sorted(ds_dir.glob("*.jsonl"))
    )
    history = _git_releases_history(reg.root)
    decisions: list[PruneDecision] = []
    for pid in reg.prompt_ids():
        versions = reg.versions(pid)
        latest = versions[max(versions)]
        for ver, spec in versions.items():
            if ver == latest.version:
                continue
            reasons: list[str] = []
            successor = next((c for c in latest.header.changes if c.version == ver + 1), None)
            if successor is None:
                reasons.append(f"no changelog date for v{ver + 1} in {latest.qualified}")
            else:
                age = (today - successor.date).days
                if age < PRUNE_AFTER_DAYS:
                    reasons.append(
                        f"superseded {age} days ago (v{ver + 1} on {successor.date}); "
                        f"needs ≥ {PRUNE_AFTER_DAYS}"
                    )
                if not history:
                    reasons.append(
                        f"no git history of {RELEASES_FILE}: cannot show it was not rolled back to"
                    )
                rolled = [
                    d for d, active in history if d >= successor.date and active.get(pid) == ver
                ]
                if rolled:
                    reasons.append(
                        f"rolled back to on {rolled[0].isoformat()} (releases.toml history)"
                    )
            rel = reg.release(pid)
            if rel is not None and ver in (rel.active, rel.fallback):
                which = "active" if ver == rel.active else "fallback"
                reasons.append(f"releases.toml names it as {which}")
            if spec.qualified in case_text:
                reasons.append(f"a dataset case under {ds_dir} refers to {spec.qualified}")
            decisions.append(PruneDecision(spec.qualified, not reasons, tuple(reasons)))
    return decisions


def days_ago(n: int, today: date | None = None) -> date:
    return (today or date.today()) - timedelta(days=n)


# -- staged rollout (seed 004 §4.3) ------------------------------------------------------------


def _rollout_release(reg: PromptRegistry, name: str) -> Release:
    pid = re.sub(r"_v\d+$", "", name.strip())
    if pid not in reg.prompt_ids():
        raise PromptError(f"unknown prompt {pid!r}; known prompts: {', '.join(reg.prompt_ids())}")
    rel = reg.releases.entries.get(pid)
    if rel is None or rel.active is None:
        raise PromptError(
            f"{pid} has no releases.toml entry with an active version; a rollout needs one "
            "(`rag prompts new` writes it)"
        )
    return rel


def start_rollout(
    reg: PromptRegistry, name: str, version: int, now: datetime
) -> tuple[Release, Rollout, str | None, str | None]:
    """Start serving ``version`` of ``name`` at the plan's first stage. Refused (every reason
    at once) for an unreleasable, unlocked or model-incompatible version."""
    rel = _rollout_release(reg, name)
    pid = rel.prompt_id
    plan = plan_of(reg.releases)
    if rel.rollout is not None:
        raise PromptError(
            f"{pid} is already rolling out v{rel.rollout.candidate} (stage {rel.rollout.stage}); "
            f"move it with --promote, or end it with --abort first"
        )
    if reg.lock_problem is not None:
        raise PromptError(reg.lock_problem)
    modules = {m.version: m for m in reg.modules if f"{m.category}/{m.slug}" == pid}
    problems = rollout_problems(pid, version, modules, reg.lock, rel.active)
    if problems:
        raise PromptError(f"refusing to roll out {pid}_v{version}:\n  - " + "\n  - ".join(problems))
    rollout = Rollout(version, plan[0].name, plan[0].percent, utc_iso(now))
    old, new = set_rollout(reg.root, pid, rollout)
    return rel, rollout, old, new


def move_rollout(
    reg: PromptRegistry, name: str, stage: Stage, now: datetime
) -> tuple[Rollout, str | None, str | None]:
    rel = _rollout_release(reg, name)
    assert rel.rollout is not None
    rollout = Rollout(rel.rollout.candidate, stage.name, stage.percent, utc_iso(now))
    old, new = set_rollout(reg.root, rel.prompt_id, rollout)
    return rollout, old, new


def abort_rollout(reg: PromptRegistry, name: str) -> tuple[Release, str | None]:
    rel = _rollout_release(reg, name)
    if rel.rollout is None:
        raise PromptError(f"{rel.prompt_id} has no rollout under way; nothing to abort")
    old, _ = set_rollout(reg.root, rel.prompt_id, None)
    return rel, old


def promote_candidate(reg: PromptRegistry, name: str) -> tuple[Release, list[tuple[str, str]]]:
    """The candidate becomes active, the old active its fallback, the rollout line goes:
    ``rag prompts rollback`` stays the one-line switch back."""
    rel = _rollout_release(reg, name)
    assert rel.rollout is not None and rel.active is not None
    pid, old_active = rel.prompt_id, rel.active
    changes = [
        set_active(reg.root, pid, rel.rollout.candidate),
        set_fallback(reg.root, pid, old_active),
    ]
    old, _ = set_rollout(reg.root, pid, None)
    changes.append((old or "", ""))
    return rel, changes
