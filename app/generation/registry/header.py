"""The docstring header of a prompt module, parsed into typed, frozen data.

A header is ``Key: value`` lines with Chinese or English keys (seed 004 §3)::

    Prompt: KB 主回答              | 版本: v2            | 用途: ...
    适用模型: claude-sonnet-4-6, claude-opus-4-7
    创建人: 张三 (2026-04-01)      | 最近修改: 李四 (2026-05-10)
    变更摘要:                      (a list of "- v2 (2026-05-10): what changed")
    评测基线:                      (a list of "- smoke set: faithfulness=4.35, ... (2026-05-10)")

Parsing never raises: problems become :class:`HeaderIssue` records that the checker turns
into violations with a line number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

# canonical field -> accepted keys (Chinese first, then English)
HEADER_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("Prompt", "名称"),
    "version": ("版本", "Version"),
    "purpose": ("用途", "Purpose"),
    "models": ("适用模型", "Models"),
    "author": ("创建人", "Author"),
    "modified": ("最近修改", "Modified"),
    "changes": ("变更摘要", "Changes"),
    "baselines": ("评测基线", "Baseline", "Baselines"),
}
REQUIRED_HEADER_FIELDS: tuple[str, ...] = (
    "name",
    "version",
    "purpose",
    "models",
    "author",
    "changes",
)
LIST_FIELDS = frozenset({"changes", "baselines"})
_KEY_TO_FIELD = {key.lower(): name for name, keys in HEADER_KEYS.items() for key in keys}
_LINE_RE = re.compile(r"^\s*([^:：\-\s][^:：]{0,20}?)\s*[:：]\s*(.*)$")
_PERSON_RE = re.compile(r"^(?P<name>.*?)\s*[(（]\s*(?P<date>\d{4}-\d{2}-\d{2})\s*[)）]\s*$")
_CHANGE_RE = re.compile(
    r"^-\s*v(?P<v>\d+)\s*[(（]\s*(?P<date>\d{4}-\d{2}-\d{2})\s*[)）]\s*[:：]\s*(?P<text>.+)$"
)
_BASELINE_RE = re.compile(
    r"^-\s*(?P<suite>[^:：]+?)\s*[:：]\s*(?P<metrics>.+?)\s*[(（]\s*(?P<date>\d{4}-\d{2}-\d{2})\s*[)）]\s*$"
)
_METRIC_RE = re.compile(r"^\s*(?P<name>[A-Za-z_][\w@.\-]*)\s*=\s*(?P<value>-?\d+(?:\.\d+)?)\s*$")


@dataclass(frozen=True)
class Person:
    name: str
    date: date | None


@dataclass(frozen=True)
class ChangeEntry:
    version: int
    date: date
    summary: str
    line: int


@dataclass(frozen=True)
class Baseline:
    """One ``评测基线`` line: suite, metric values and the date they were measured."""

    suite: str
    metrics: tuple[tuple[str, float], ...]
    date: date
    line: int

    def metric(self, name: str) -> float | None:
        return dict(self.metrics).get(name)


@dataclass(frozen=True)
class HeaderIssue:
    kind: str  # "missing-field" | "malformed-line" | "malformed-baseline" | "malformed-change"
    field: str
    line: int
    detail: str


@dataclass(frozen=True)
class PromptHeader:
    name: str | None = None
    version: str | None = None  # "v2"
    purpose: str | None = None
    models: tuple[str, ...] = ()
    author: Person | None = None
    modified: Person | None = None
    changes: tuple[ChangeEntry, ...] = ()
    baselines: tuple[Baseline, ...] = ()
    lines: tuple[tuple[str, int], ...] = ()  # field -> line of its key, for error messages
    issues: tuple[HeaderIssue, ...] = field(default=(), compare=False)

    def line_of(self, name: str) -> int | None:
        return dict(self.lines).get(name)

    def to_dict(self) -> dict[str, object]:
        def person(p: Person | None) -> dict[str, str | None] | None:
            if p is None:
                return None
            return {"name": p.name, "date": p.date.isoformat() if p.date else None}

        return {
            "name": self.name,
            "version": self.version,
            "purpose": self.purpose,
            "models": list(self.models),
            "author": person(self.author),
            "modified": person(self.modified),
            "changes": [
                {"version": f"v{c.version}", "date": c.date.isoformat(), "summary": c.summary}
                for c in self.changes
            ],
            "baselines": [
                {"suite": b.suite, "metrics": dict(b.metrics), "date": b.date.isoformat()}
                for b in self.baselines
            ],
        }


def _parse_date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _person(text: str) -> Person:
    m = _PERSON_RE.match(text)
    if m:
        return Person(m.group("name").strip(), _parse_date(m.group("date")))
    return Person(text.strip(), None)


def parse_header(docstring: str, first_line: int) -> PromptHeader:
    """Parse a module docstring whose first character sits on ``first_line``."""
    scalars: dict[str, str] = {}
    lists: dict[str, list[tuple[str, int]]] = {}
    lines: dict[str, int] = {}
    issues: list[HeaderIssue] = []
    current_list: str | None = None
    for offset, raw in enumerate(docstring.splitlines()):
        lineno = first_line + offset
        text = raw.strip()
        if not text:
            continue
        if text.startswith("-") and current_list is not None:
            lists[current_list].append((text, lineno))
            continue
        m = _LINE_RE.match(text)
        field_name = _KEY_TO_FIELD.get(m.group(1).strip().lower()) if m else None
        if m is None or field_name is None:
            current_list = None
            continue  # free prose in the docstring is allowed
        lines[field_name] = lineno
        value = m.group(2).strip()
        if field_name in LIST_FIELDS:
            current_list = field_name
            lists.setdefault(field_name, [])
            if value:
                lists[field_name].append((f"- {value}", lineno))
        else:
            current_list = None
            scalars[field_name] = value

    changes: list[ChangeEntry] = []
    for text, lineno in lists.get("changes", []):
        cm = _CHANGE_RE.match(text)
        parsed = _parse_date(cm.group("date")) if cm else None
        if cm is None or parsed is None:
            issues.append(
                HeaderIssue(
                    "malformed-change", "changes", lineno, "expected '- vN (YYYY-MM-DD): summary'"
                )
            )
            continue
        changes.append(ChangeEntry(int(cm.group("v")), parsed, cm.group("text").strip(), lineno))

    baselines: list[Baseline] = []
    for text, lineno in lists.get("baselines", []):
        bm = _BASELINE_RE.match(text)
        bdate = _parse_date(bm.group("date")) if bm else None
        metrics: list[tuple[str, float]] = []
        ok = bm is not None and bdate is not None
        if bm is not None and ok:
            for part in bm.group("metrics").split(","):
                mm = _METRIC_RE.match(part)
                if mm is None:
                    ok = False
                    break
                metrics.append((mm.group("name"), float(mm.group("value"))))
        if not ok or bm is None or bdate is None:
            issues.append(
                HeaderIssue(
                    "malformed-baseline",
                    "baselines",
                    lineno,
                    "expected '- <suite>: metric=value, ... (YYYY-MM-DD)'",
                )
            )
            continue
        baselines.append(Baseline(bm.group("suite").strip(), tuple(metrics), bdate, lineno))

    for name in REQUIRED_HEADER_FIELDS:
        present = scalars.get(name) if name not in LIST_FIELDS else lists.get(name)
        if not present:
            issues.append(HeaderIssue("missing-field", name, lines.get(name, first_line), ""))

    for name in ("author", "modified"):  # "张三 (2026-13-45)": a date no calendar has
        pm = _PERSON_RE.match(scalars.get(name, ""))
        if pm is not None and _parse_date(pm.group("date")) is None:
            issues.append(
                HeaderIssue(
                    "malformed-date",
                    name,
                    lines.get(name, first_line),
                    f"{pm.group('date')} is not a calendar date — write 'name (YYYY-MM-DD)'",
                )
            )

    models = tuple(m.strip() for m in scalars.get("models", "").split(",") if m.strip())
    return PromptHeader(
        name=scalars.get("name") or None,
        version=scalars.get("version") or None,
        purpose=scalars.get("purpose") or None,
        models=models,
        author=_person(scalars["author"]) if scalars.get("author") else None,
        modified=_person(scalars["modified"]) if scalars.get("modified") else None,
        changes=tuple(changes),
        baselines=tuple(baselines),
        lines=tuple(sorted(lines.items())),
        issues=tuple(issues),
    )
