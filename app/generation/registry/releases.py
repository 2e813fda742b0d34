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
from pathlib import Path

from app.errors import ConfigError
from app.limits import limit
from app.safe_io import UnsafeInput, read_text

RELEASES_FILE = "releases.toml"
LOCK_FILE = "prompts.lock"
PIN_ENV = "RAG_PROMPT_PIN"
_VERSION_RE = re.compile(r"^v([1-9][0-9]*)$")


@dataclass(frozen=True)
class Release:
    prompt_id: str
    active: int | None
    fallback: int | None
    line: int | None  # line of the [prompts."…"] table header


@dataclass(frozen=True)
class Releases:
    entries: dict[str, Release]
    problems: tuple[tuple[int | None, str], ...] = ()


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
    for i, line in enumerate(text.splitlines(), start=1):
        m = re.match(r'^\s*\[prompts\."([^"]+)"\]\s*$', line)
        if m:
            header_lines[m.group(1)] = i
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
        entries[pid] = Release(pid, active, fallback, hline)
    return Releases(entries, tuple(problems))


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


def set_active(root: Path, prompt_id: str, version: int) -> tuple[str, str]:
    """Rewrite the one ``active = …`` line of ``prompt_id``; return (old line, new line)."""
    path = root / RELEASES_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    in_table = False
    for i, line in enumerate(lines):
        header = re.match(r'^\s*\[prompts\."([^"]+)"\]\s*$', line)
        if header:
            in_table = header.group(1) == prompt_id
            continue
        if line.lstrip().startswith("["):
            in_table = False
        if in_table and re.match(r"^\s*active\s*=", line):
            ending = "\n" if line.endswith("\n") else ""
            new = re.sub(r"=\s*\"[^\"]*\"", f'= "v{version}"', line.rstrip("\n")) + ending
            old = lines[i]
            lines[i] = new
            path.write_text("".join(lines), encoding="utf-8")
            return old.rstrip("\n"), new.rstrip("\n")
    raise ConfigError(f'{path}: no `active = ...` line under [prompts."{prompt_id}"]')


def add_release(root: Path, prompt_id: str, version: int) -> str:
    """Append ``[prompts."<prompt_id>"]`` with ``version`` as active and fallback to
    ``releases.toml``; return the lines written."""
    path = root / RELEASES_FILE
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f'[prompts."{prompt_id}"]\nactive = "v{version}"\nfallback = "v{version}"\n'
    sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    path.write_text(text + sep + block, encoding="utf-8")
    return block
