"""Every rule the loader enforces, applied to a whole prompts tree; never stops at the first.

Per-module rules run on :class:`~app.generation.registry.loader.LoadedModule` records; tree rules
(releases, lock, ``--changed-since``) run on the set. Codes and fixes: :mod:`rules`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from app.errors import ConfigError
from app.generation.registry.header import HEADER_KEYS
from app.generation.registry.loader import LoadedModule, fixture_variables, placeholders
from app.generation.registry.releases import LOCK_FILE, RELEASES_FILE, Releases, released
from app.generation.registry.rollout import plan_of, stage_index
from app.generation.registry.rules import Violation


def check_module(mod: LoadedModule) -> None:
    """Add the per-module violations to ``mod.violations``."""
    c = mod.constants
    if mod.docstring is None:
        if not any(v.code == "P000" for v in mod.violations):
            mod.add("P002", 1, "the module has no docstring header")
    elif mod.header is not None:
        for issue in mod.header.issues:
            if issue.kind == "missing-field":
                keys = " / ".join(HEADER_KEYS[issue.field][:2])
                mod.add("P003", issue.line, f"header field {keys} is missing or empty")
            else:
                mod.add("P022", issue.line, f"header {issue.field} line: {issue.detail}")
        for change in mod.header.changes:  # `rag prompts new` writes a TODO to be replaced
            if re.match(r"(?i)todo\b", change.summary):
                mod.add("P029", change.line, f"v{change.version} change summary is a placeholder")
    if mod.version == 0:
        return  # bad file name: P021 already says so; the rest needs a version
    expected = f"{mod.slug}_v{mod.version}"
    version = c.get("VERSION")
    if isinstance(version, str) and version != expected:
        mod.add(
            "P001",
            mod.lines.get("VERSION"),
            f'VERSION = "{version}" but the file is {mod.path.name} (expected "{expected}")',
        )
    header = mod.header
    if header is not None and header.version and header.version != f"v{mod.version}":
        mod.add(
            "P004",
            header.line_of("version"),
            f"header says {header.version} but the file is v{mod.version}",
        )
    spec = mod.spec
    if spec is None:
        return
    if not spec.applicable_models:
        mod.add("P006", mod.lines.get("APPLICABLE_MODELS"), "APPLICABLE_MODELS is empty")
    if (
        header is not None
        and header.models
        and spec.applicable_models
        and set(header.models) != set(spec.applicable_models)
    ):
        mod.add(
            "P005",
            header.line_of("models"),
            f"header models {sorted(header.models)} != APPLICABLE_MODELS "
            f"{sorted(spec.applicable_models)}",
        )
    _check_variables(mod)
    _check_fixtures(mod)
    _check_qa(mod)


def _check_variables(mod: LoadedModule) -> None:
    spec = mod.spec
    assert spec is not None
    contract = spec.contract
    line = mod.lines.get("USER_TEMPLATE")
    used = spec.variables
    if contract is None:
        return
    if contract.declared:
        declared = mod.constants.get("VARIABLES")
        if declared is None:
            mod.add("P020", None, f"{contract.name} prompts must declare VARIABLES")
            return
        required = allowed = frozenset(declared)
        line = mod.lines.get("VARIABLES", line)
    else:
        required = contract.required
        allowed = contract.required if contract.exact else contract.required | contract.optional
    for name in sorted(required - used):
        mod.add(
            "P009",
            line,
            f"placeholder {{{name}}} is missing; {contract.name} prompts use {contract.describe()}",
        )
    for name in sorted(used - allowed):
        where = "SYSTEM_PROMPT" if name not in _names(spec.user_template) else "USER_TEMPLATE"
        mod.add(
            "P010",
            mod.lines.get(where, line),
            f"placeholder {{{name}}} in {where} is not in the {contract.name} contract "
            f"({contract.describe()})",
        )
    for name in sorted(set(spec.defaults) - used):
        mod.add("P010", mod.lines.get("DEFAULTS"), f"DEFAULTS names {name!r}, not a placeholder")


def _names(template: str) -> set[str]:
    return placeholders(template)[0]


def _check_fixtures(mod: LoadedModule) -> None:
    spec = mod.spec
    assert spec is not None
    line = mod.lines.get("TEST_FIXTURES")
    n = len(spec.test_fixtures)
    if not 3 <= n <= 5:
        mod.add("P007", line, f"TEST_FIXTURES has {n} entries; 3 to 5 are required")
    needed = spec.variables - set(spec.defaults)
    contract = spec.contract
    if contract is not None and not contract.declared:
        # a placeholder outside the contract is reported once, as P010, not per fixture
        needed &= contract.required | contract.optional
    for i, fixture in enumerate(spec.test_fixtures, start=1):
        if not hasattr(fixture, "keys"):
            mod.add("P008", line, f"fixture #{i} is not a dict")
            continue
        values = fixture_variables(spec, fixture)
        filled = set(values)
        problems: list[str] = []
        missing = sorted(needed - filled)
        # a contract variable the template lacks is reported once, as P009, not per fixture
        contract_vars = contract.required | contract.optional if contract else frozenset()
        unknown = sorted(filled - spec.variables - contract_vars)
        if missing:
            problems.append(f"gives no value for {missing}")
        if unknown:
            problems.append(f"has keys {unknown} that are not template variables")
        if any(not isinstance(v, str) for v in values.values()):
            problems.append("has a variable value that is not a string")
        phrases = fixture.get("expected_phrases")
        if not (
            isinstance(phrases, list | tuple)
            and phrases
            and all(isinstance(p, str) and p for p in phrases)
        ):
            problems.append("needs a non-empty expected_phrases list of strings")
        if problems:
            mod.add("P008", line, f"fixture #{i} " + "; ".join(problems))


def _check_qa(mod: LoadedModule) -> None:
    spec = mod.spec
    assert spec is not None
    if spec.contract is None or not spec.contract.qa:
        return
    missing = [
        name
        for name in ("REJECTION_TRIGGER_KEYWORDS", "REJECTION_ANSWER", "CANARY")
        if not mod.constants.get(name)
    ]
    if missing:
        mod.add("P012", None, f"QA prompt lacks {', '.join(missing)}")
    text = (spec.system_prompt or "") + "\n" + spec.user_template
    keywords = spec.rejection_trigger_keywords
    if keywords and not any(k in text for k in keywords):
        mod.add(
            "P011",
            mod.lines.get("SYSTEM_PROMPT", mod.lines.get("USER_TEMPLATE")),
            f"no refusal wording in the templates contains a trigger keyword {list(keywords)}",
        )
    if spec.canary and spec.canary not in (spec.system_prompt or ""):
        mod.add("P013", mod.lines.get("CANARY"), f"CANARY {spec.canary!r} is not in SYSTEM_PROMPT")


def check_tree(
    modules: Iterable[LoadedModule], releases: Releases, lock: dict[str, str]
) -> list[Violation]:
    """Release, fallback and lock rules across the tree."""
    out: list[Violation] = []
    by_id: dict[str, dict[int, LoadedModule]] = {}
    for mod in modules:
        if mod.version:
            by_id.setdefault(f"{mod.category}/{mod.slug}", {})[mod.version] = mod
    for line, problem in releases.problems:
        out.append(Violation("P025", RELEASES_FILE, line, problem))
    effective = dict(releases.entries)
    for pid, versions in sorted(by_id.items()):
        rel = released(releases, pid, versions)
        latest = versions[max(versions)]
        if rel is None or rel.fallback is None or rel.active is None:
            what = (
                f"{len(versions)} versions and no releases.toml entry"
                if rel is None
                else "no active and fallback versions"
            )
            out.append(Violation("P014", latest.rel, None, f"prompt {pid} has {what}"))
        else:
            effective[pid] = rel
    for pid, rel in sorted(effective.items()):
        versions = by_id.get(pid, {})
        pointers = (("active", rel.active), ("fallback", rel.fallback))
        for key, ver in pointers:
            if ver is None or (key == "fallback" and ver == rel.active):
                continue
            module = versions.get(ver)
            if module is None:
                out.append(
                    Violation(
                        "P015", RELEASES_FILE, rel.line, f"{pid}: {key} = v{ver} has no module"
                    )
                )
            elif f"{pid}_v{ver}" not in lock:
                out.append(
                    Violation(
                        "P017",
                        module.rel,
                        None,
                        f"{pid}_v{ver} is released ({key}) but not in {LOCK_FILE}",
                    )
                )
    out += _check_rollouts(by_id, releases, lock)
    for mods in by_id.values():
        for mod in mods.values():
            locked = lock.get(f"{mod.category}/{mod.slug}_v{mod.version}")
            if locked is not None and locked != mod.content_hash:
                out.append(
                    Violation(
                        "P016",
                        mod.rel,
                        None,
                        f"content changed since it was locked ({locked[:19]}… -> {mod.content_hash[:19]}…)",
                    )
                )
    return out


def _git(root: Path, *args: str) -> str:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"git is not available for --changed-since: {exc}") from exc
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip()}")
    return proc.stdout


def changed_files(root: Path, rev: str) -> tuple[set[str], str]:
    """Files under ``root`` changed since ``rev`` (committed, staged, unstaged or untracked),
    relative to root; and root's path relative to the git top level."""
    top = Path(_git(root, "rev-parse", "--show-toplevel").strip())
    prefix = root.resolve().relative_to(top.resolve()).as_posix()
    names = _git(root, "diff", "--name-only", rev, "--", ".").splitlines()
    names += _git(
        root, "ls-files", "--others", "--exclude-standard", "--full-name", "."
    ).splitlines()
    out = set()
    for name in names:
        p = Path(name).as_posix()
        if prefix in ("", "."):
            out.add(p)
        elif p.startswith(prefix + "/"):
            out.add(p[len(prefix) + 1 :])
    return out, prefix


def check_changed_since(
    root: Path, rev: str, modules: Iterable[LoadedModule], lock: dict[str, str]
) -> list[Violation]:
    """P023 (released version edited in place) and P024 (judge + judged in one change)."""
    import tomllib

    changed, prefix = changed_files(root, rev)
    lock_path = f"{prefix}/{LOCK_FILE}" if prefix not in ("", ".") else LOCK_FILE
    try:
        old_lock_text = _git(root, "show", f"{rev}:{lock_path}")
        old_lock = {str(k) for k in tomllib.loads(old_lock_text).get("versions", {})}
    except (ConfigError, tomllib.TOMLDecodeError):
        old_lock = set()
    out: list[Violation] = []
    mods = {m.rel: m for m in modules}
    judge_changed: list[str] = []
    judged_changed: list[str] = []
    for rel in sorted(changed):
        mod = mods.get(rel)
        if mod is None or not mod.version:
            continue
        qid = f"{mod.category}/{mod.slug}_v{mod.version}"
        if qid in old_lock and _exists_at(root, rev, prefix, rel):
            out.append(
                Violation("P023", rel, None, f"{qid} is released and was edited since {rev}")
            )
        if mod.category == "judge":
            judge_changed.append(rel)
        elif mod.spec is not None and mod.spec.contract is not None and mod.spec.contract.qa:
            judged_changed.append(rel)
    # with no prompts.lock at REV there was no released ruler to move (the library's first commit)
    if judge_changed and judged_changed and old_lock:
        for rel in judge_changed:
            out.append(
                Violation(
                    "P024",
                    rel,
                    None,
                    f"this change edits the judge {rel} and the judged prompts "
                    f"{', '.join(judged_changed)} together",
                )
            )
    return out


def _exists_at(root: Path, rev: str, prefix: str, rel: str) -> bool:
    path = f"{prefix}/{rel}" if prefix not in ("", ".") else rel
    try:
        _git(root, "cat-file", "-e", f"{rev}:{path}")
    except ConfigError:
        return False
    return True


def rollout_problems(
    pid: str,
    candidate: int,
    versions: dict[int, LoadedModule],
    lock: dict[str, str],
    active: int | None,
) -> list[str]:
    """Why ``candidate`` may not be served to users as a rollout of ``pid``: no module, a
    module with violations (not releasable), not locked or changed since, the active version
    itself, or not written for a model the active version serves."""
    qid = f"{pid}_v{candidate}"
    module = versions.get(candidate)
    if module is None or module.spec is None:
        return [f"{qid} has no loadable module"]
    problems: list[str] = []
    if candidate == active:
        problems.append(f"{qid} is already the active version")
    own = sorted({v.code for v in module.violations})
    if own:
        problems.append(f"{qid} is not releasable: {', '.join(own)} (run `rag prompts check`)")
    locked = lock.get(qid)
    if locked is None:
        problems.append(f"{qid} is not locked (run `rag prompts lock` after review)")
    elif locked != module.content_hash:
        problems.append(f"{qid} changed since it was locked")
    current = versions.get(active or 0)
    if current is not None and current.spec is not None:
        lost = [m for m in current.spec.applicable_models if m not in module.spec.applicable_models]
        if lost:
            problems.append(
                f"{qid} is not written for {', '.join(lost)}, which v{active} serves "
                "(model-incompatible: add them to APPLICABLE_MODELS or keep the canary off)"
            )
        if module.spec.variables - current.spec.variables - {"chat_history"}:
            extra = sorted(module.spec.variables - current.spec.variables)
            problems.append(f"{qid} needs variables v{active} is not given: {', '.join(extra)}")
    return problems


def _check_rollouts(
    by_id: dict[str, dict[int, LoadedModule]], releases: Releases, lock: dict[str, str]
) -> list[Violation]:
    rolling = {pid: rel for pid, rel in releases.entries.items() if rel.rollout is not None}
    if not rolling:
        return []
    try:
        plan = plan_of(releases)
    except ValueError as exc:
        return [Violation("P030", RELEASES_FILE, None, str(exc))]
    out: list[Violation] = []
    for pid, rel in sorted(rolling.items()):
        rollout = rel.rollout
        assert rollout is not None
        line = rollout.line or rel.line
        for problem in rollout_problems(
            pid, rollout.candidate, by_id.get(pid, {}), lock, rel.active
        ):
            out.append(Violation("P030", RELEASES_FILE, line, f"{pid} rollout: {problem}"))
        try:
            stage = plan[stage_index(plan, rollout)]
        except ValueError as exc:
            out.append(Violation("P030", RELEASES_FILE, line, f"{pid}: {exc}"))
            continue
        if stage.percent != rollout.percent:
            out.append(
                Violation(
                    "P030",
                    RELEASES_FILE,
                    line,
                    f"{pid}: rollout.percent = {rollout.percent:g} but stage {stage.name} "
                    f"serves {stage.percent:g} %",
                )
            )
    return out
