"""``releases.toml`` (active + fallback per prompt), ``prompts.lock`` (hash per released
version) and the ``RAG_PROMPT_PIN`` environment override.

``releases.toml``::

    [prompts."system/kb_qa"]
    active = "v2"
    fallback = "v1"

``prompts.lock``::

    [versions]
    "system/kb_qa_v1" = "sha256:…"

Both are written by line edits so a rollback is a one-line diff.

A staged rollout (seed 004 §4.3) is one more line in the prompt's table, an inline table::

    rollout = { candidate = "v3", stage = "canary", percent = 1.0, since = "2026-12-05T07:00:00Z" }

``candidate`` is served to ``percent`` % of users (chosen by a stable hash of the user id,
:mod:`app.generation.registry.rollout`), everyone else gets ``active``. Starting, moving and
aborting a rollout each change that one line; promotion sets ``active`` to the candidate,
``fallback`` to the old active and removes the line. The ladder of stages is the default plan
of :mod:`~app.generation.registry.rollout`, or a top-level ``[rollout]`` table's ``stages``.

A prompt with a single version needs no ``releases.toml`` entry: it is released as
``active = fallback = v1`` (:func:`released`). That version is the only possible choice for
both, so an entry naming it twice would carry no information; seed 004's red line (every
prompt has a fallback) is met by v1 itself until a second version exists. From then on which
version is live is a decision, and the entry is required (``rag prompts new`` writes it,
keeping the live version live).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.errors import ConfigError
from app.limits import limit
from app.safe_io import UnsafeInput, read_text

RELEASES_FILE = "releases.toml"
LOCK_FILE = "prompts.lock"
PIN_ENV = "RAG_PROMPT_PIN"
_VERSION_RE = re.compile(r"^v([1-9][0-9]*)$")


@dataclass(frozen=True)
class Rollout:
    """A candidate version served to ``percent`` % of users since ``since`` (UTC ISO)."""

    candidate: int
    stage: str
    percent: float
    since: str
    line: int | None = None  # line of the ``rollout = {…}`` entry


@dataclass(frozen=True)
class Release:
    prompt_id: str
    active: int | None
    fallback: int | None
    line: int | None  # line of the [prompts."…"] table header
    rollout: Rollout | None = None


@dataclass(frozen=True)
class Releases:
    entries: dict[str, Release]
    problems: tuple[tuple[int | None, str], ...] = ()
    plan: tuple[dict[str, object], ...] | None = None  # [rollout] stages, unvalidated


def parse_since(text: str) -> datetime:
    """A UTC ISO timestamp (``2026-12-05T07:00:00Z``); ValueError naming the problem."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rollout(pid: str, table: object, line: int | None) -> tuple[Rollout | None, str | None]:
    """The ``rollout`` inline table of ``pid``, or the problem with it."""
    if not isinstance(table, dict):
        return None, f'{pid}: rollout must be an inline table {{ candidate = "v3", … }}'
    candidate = parse_version(table.get("candidate"))
    if candidate is None:
        return (
            None,
            f'{pid}: rollout.candidate = {table.get("candidate")!r} is not a version like "v3"',
        )
    stage = table.get("stage")
    if not isinstance(stage, str) or not stage:
        return None, f'{pid}: rollout.stage must be a stage name (e.g. "canary")'
    percent = table.get("percent")
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 <= percent <= 100:
        return None, f"{pid}: rollout.percent = {percent!r} must be a number from 0 to 100"
    since = table.get("since")
    try:
        if not isinstance(since, str):
            raise ValueError("not a string")
        parse_since(since)
    except ValueError:
        return (
            None,
            f'{pid}: rollout.since = {since!r} is not a UTC time like "2026-12-05T07:00:00Z"',
        )
    return Rollout(candidate, stage, float(percent), since, line), None


def released(releases: Releases, prompt_id: str, versions: Collection[int]) -> Release | None:
    """``prompt_id``'s entry, or for a prompt with a single version and no entry, that
    version as both active and fallback (see the module docstring)."""
    entry = releases.entries.get(prompt_id)
    if entry is None and len(versions) == 1:
        (only,) = versions
        return Release(prompt_id, only, only, None)
    return entry


def parse_version(text: object) -> int | None:
    if isinstance(text, str):
        m = _VERSION_RE.match(text.strip())
        if m:
            return int(m.group(1))
    return None


def read_releases(root: Path) -> Releases:
    path = root / RELEASES_FILE
    if not os.path.lexists(path):
        return Releases({}, ((None, f"{RELEASES_FILE} does not exist"),))
    try:  # a FIFO, device, loop, directory, binary or over-size file is refused unread
        text = read_text(path, max_bytes=limit("toml_file_bytes"), what="releases file")
    except UnsafeInput as exc:
        return Releases({}, ((exc.line, f"{RELEASES_FILE}: {exc.problem}"),))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Releases({}, ((None, f"{RELEASES_FILE} does not parse: {exc}"),))
    except RecursionError:
        return Releases({}, ((None, f"{RELEASES_FILE} is nested too deeply to parse"),))
    header_lines: dict[str, int] = {}
    rollout_lines: dict[str, int] = {}
    current: str | None = None
    for i, line in enumerate(text.splitlines(), start=1):
        m = re.match(r'^\s*\[prompts\."([^"]+)"\]\s*$', line)
        if m:
            header_lines[m.group(1)] = i
            current = m.group(1)
        elif line.lstrip().startswith("["):
            current = None
        elif current is not None and re.match(r"^\s*rollout\s*=", line):
            rollout_lines[current] = i
    entries: dict[str, Release] = {}
    problems: list[tuple[int | None, str]] = []
    prompts = data.get("prompts", {})
    if not isinstance(prompts, dict):
        return Releases({}, ((None, "[prompts] must be a table"),))
    for pid, table in prompts.items():
        hline: int | None = header_lines.get(pid)
        if not isinstance(table, dict):
            problems.append((hline, f"{pid}: expected a table with active and fallback"))
            continue
        active, fallback = parse_version(table.get("active")), parse_version(table.get("fallback"))
        for key, value in (("active", active), ("fallback", fallback)):
            if key in table and value is None:
                problems.append(
                    (hline, f'{pid}: {key} = {table[key]!r} is not a version like "v2"')
                )
        rollout: Rollout | None = None
        if "rollout" in table:
            rline = rollout_lines.get(pid, hline)
            rollout, problem = _rollout(pid, table["rollout"], rline)
            if problem:
                problems.append((rline, problem))
        entries[pid] = Release(pid, active, fallback, hline, rollout)
    plan = data.get("rollout", {})
    stages = plan.get("stages") if isinstance(plan, dict) else None
    if plan and not (
        isinstance(stages, list) and stages and all(isinstance(s, dict) for s in stages)
    ):
        problems.append((None, "[rollout] stages must be a list of tables {name, percent, …}"))
        stages = None
    return Releases(entries, tuple(problems), tuple(stages) if stages else None)


def read_lock(root: Path) -> dict[str, str]:
    path = root / LOCK_FILE
    if not os.path.lexists(path):
        return {}
    try:
        text = read_text(path, max_bytes=limit("toml_file_bytes"), what="lock file")
        data = tomllib.loads(text)
    except UnsafeInput as exc:
        raise ConfigError(f"{exc}; regenerate it with `rag prompts lock`") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ConfigError(
            f"{path}: does not parse ({reason}); regenerate it with `rag prompts lock`"
        ) from None
    versions = data.get("versions", {})
    return {str(k): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {}


def write_lock(root: Path, hashes: dict[str, str]) -> None:
    lines = [
        "# Content hashes of released prompt versions. Written by `rag prompts lock`; do not edit.",
        "# A released version is never edited in place: copy it with `rag prompts new`.",
        "",
        "[versions]",
    ]
    lines += [f'"{qid}" = "{h}"' for qid, h in sorted(hashes.items())]
    (root / LOCK_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def parse_pins(value: str | None = None) -> dict[str, int]:
    """``system/kb_qa=v1,judge/faithfulness=v1`` -> {"system/kb_qa": 1, ...}."""
    raw = os.environ.get(PIN_ENV, "") if value is None else value
    pins: dict[str, int] = {}
    if not raw:  # the usual case, asked for on every prompt lookup
        return pins
    for item in filter(None, (p.strip() for p in raw.split(","))):
        pid, sep, ver = item.partition("=")
        version = parse_version(ver)
        if not sep or version is None or "/" not in pid:
            raise ConfigError(
                f"{PIN_ENV}: {item!r} is not <category>/<slug>=v<N> (e.g. system/kb_qa=v1)"
            )
        pins[pid.strip()] = version
    return pins


def _table_span(lines: list[str], prompt_id: str) -> tuple[int, int] | None:
    """[first, end) line indexes of ``[prompts."<prompt_id>"]``'s body (after its header)."""
    start: int | None = None
    for i, line in enumerate(lines):
        header = re.match(r'^\s*\[prompts\."([^"]+)"\]\s*$', line)
        if start is None:
            if header and header.group(1) == prompt_id:
                start = i + 1
        elif line.lstrip().startswith("["):
            end = i
            while end > start and not lines[end - 1].strip():  # keep the blank separator
                end -= 1
            return start, end
    if start is None:
        return None
    end = len(lines)
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def _set_version(root: Path, prompt_id: str, key: str, version: int) -> tuple[str, str]:
    path = root / RELEASES_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    span = _table_span(lines, prompt_id)
    for i in range(*(span or (0, 0))):
        line = lines[i]
        if re.match(rf"^\s*{key}\s*=", line):
            ending = "\n" if line.endswith("\n") else ""
            new = re.sub(r"=\s*\"[^\"]*\"", f'= "v{version}"', line.rstrip("\n")) + ending
            old = lines[i]
            lines[i] = new
            path.write_text("".join(lines), encoding="utf-8")
            return old.rstrip("\n"), new.rstrip("\n")
    raise ConfigError(f'{path}: no `{key} = ...` line under [prompts."{prompt_id}"]')


def set_active(root: Path, prompt_id: str, version: int) -> tuple[str, str]:
    """Rewrite the one ``active = …`` line of ``prompt_id``; return (old line, new line)."""
    return _set_version(root, prompt_id, "active", version)


def set_fallback(root: Path, prompt_id: str, version: int) -> tuple[str, str]:
    """Rewrite the one ``fallback = …`` line of ``prompt_id``; return (old line, new line)."""
    return _set_version(root, prompt_id, "fallback", version)


def rollout_line(rollout: Rollout) -> str:
    return (
        f'rollout = {{ candidate = "v{rollout.candidate}", stage = "{rollout.stage}", '
        f'percent = {rollout.percent:g}, since = "{rollout.since}" }}'
    )


def set_rollout(
    root: Path, prompt_id: str, rollout: Rollout | None
) -> tuple[str | None, str | None]:
    """Write, replace or (``None``) remove the one ``rollout = {…}`` line of ``prompt_id``;
    return (old line, new line), ``None`` for a side that does not exist."""
    path = root / RELEASES_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    span = _table_span(lines, prompt_id)
    if span is None:
        raise ConfigError(
            f'{path}: no [prompts."{prompt_id}"] table; add one with `rag prompts new`'
        )
    new = rollout_line(rollout) if rollout is not None else None
    at = next((i for i in range(*span) if re.match(r"^\s*rollout\s*=", lines[i])), None)
    old = lines[at].rstrip("\n") if at is not None else None
    if at is not None and new is None:
        del lines[at]
    elif at is not None and new is not None:
        lines[at] = new + "\n"
    elif new is not None:
        end = span[1]
        if end and not lines[end - 1].endswith("\n"):
            lines[end - 1] += "\n"
        lines.insert(end, new + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return old, new


def add_release(root: Path, prompt_id: str, version: int) -> str:
    """Append ``[prompts."<prompt_id>"]`` with ``version`` as active and fallback to
    ``releases.toml``; return the lines written."""
    path = root / RELEASES_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f'[prompts."{prompt_id}"]\nactive = "v{version}"\nfallback = "v{version}"\n'
    sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    path.write_text(text + sep + block, encoding="utf-8")
    return block
