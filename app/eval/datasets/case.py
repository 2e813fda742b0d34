"""Golden datasets: the :class:`Case` model and the loaders the harness calls.

A dataset is a JSONL file ``tests/eval/datasets/<name>_v<major>.<minor>.jsonl`` with one
case per line (seed 004 §7.2); the JSONL files are the only source of the cases. Within a
suite the newest version supersedes the older ones (the same id is the same case, updated;
``rag datasets new-version``); ids are unique inside a file and across suites. The pydantic model :class:`Case` below is the rule; the JSON
Schema ``case.schema.json`` beside the files is generated from it (:func:`case_json_schema`,
``make schema``) for editors; ``rag datasets check`` validates with ``Case`` itself and
translates its errors, so the check refuses what the loader refuses.

::

    from app.eval.datasets.case import load_suite
    suite = load_suite("smoke")          # the newest smoke_v<x.y>.jsonl
    for case in suite.cases: ...

Loading is lenient about layout (a UTF-8 BOM, CRLF line ends and blank lines are
tolerated) and strict about content: a bad line raises :class:`~app.errors.DatasetError`
naming every bad ``file:line`` at once. ``rag datasets check`` gives the full diagnosis.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from app.errors import DatasetError
from app.paths import datasets_dir
from app.retrieval.kb import ACL_GROUPS, Group  # the one ACL group list

__all__ = [
    "ACL_GROUPS",
    "CASE_FIELDS",
    "CHANGELOG_STUB",
    "DIFFICULTIES",
    "FILE_NAME_RE",
    "Case",
    "PassageAnchor",
    "Suite",
    "Turn",
    "available_suites",
    "case_json_schema",
    "iter_lines",
    "load_all_suites",
    "load_dataset_file",
    "load_suite",
    "parse_file_name",
    "schema_path",
    "suite_stats",
]

DIFFICULTIES = ("easy", "medium", "hard")
FILE_NAME_RE = re.compile(
    r"^(?P<name>[a-z][a-z0-9_]*?)_v(?P<major>[0-9]+)\.(?P<minor>[0-9]+)\.jsonl$"
)

# The same patterns as case.schema.json, applied with Python's re.search as jsonschema does.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
TEXT_PATTERN = r"\S"
CHUNK_ID_PATTERN = r"^[A-Za-z0-9_-]+:[^#\s]+#[0-9]+$"
TAG_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
SHA_PATTERN = r"^[0-9a-f]{16}$"
ID_MAX_LENGTH = 64
# the placeholder `rag datasets new-version` writes into CHANGELOG.md (--changed-since refuses it)
CHANGELOG_STUB = "(describe what changed and why)"

Difficulty = Literal["easy", "medium", "hard"]


def _check(pattern: str, value: str, what: str, index: int | None = None) -> str:
    """``value`` when it matches ``pattern`` and is valid Unicode; else a pydantic error whose
    ``type`` (``string_pattern_mismatch`` / ``string_unicode``) ``rag datasets check``
    translates (``index``: the item of a list)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") would crash the report writer
        raise PydanticCustomError(
            "string_unicode",
            "{what} holds a lone surrogate, not valid Unicode text",
            _error_context(pattern, what, index),
        ) from None
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = re.compile(pattern)
    if compiled.search(value) is None:
        raise PydanticCustomError(
            "string_pattern_mismatch",
            "{what} should match pattern '{pattern}'",
            _error_context(pattern, what, index),
        )
    return value


#: the field patterns compiled once (re.search's own cache is a lookup with a type check
#: per call, a dozen calls per case)
_COMPILED: dict[str, re.Pattern[str]] = {}


def _error_context(pattern: str, what: str, index: int | None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"pattern": pattern, "what": what}
    if index is not None:
        ctx["index"] = index
    return ctx


def _items(pattern: str) -> dict[str, Any]:
    """Schema metadata: every item of a list of strings matches ``pattern`` (the field's
    validator checks the same constant)."""
    return {"items": {"type": "string", "pattern": pattern}}


def _not_null(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("null_not_allowed", "null is not allowed; leave the field out")
    return value


class Turn(BaseModel):
    """One earlier turn of a conversation."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    role: Literal["user", "assistant"]
    content: str = Field(json_schema_extra={"pattern": TEXT_PATTERN})

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return _check(TEXT_PATTERN, v, "content")


class PassageAnchor(BaseModel):
    """Where a labelled chunk's passage is, whatever the chunk's position now
    (:mod:`app.retrieval.passages`; written by ``rag datasets anchor`` / ``repoint``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    heading: list[str] = Field(description="The enclosing headings, outermost first.")
    quote: str = Field(
        description="The passage's first characters as written.",
        json_schema_extra={"pattern": TEXT_PATTERN},
    )
    chars: int = Field(ge=1, description="Length of the passage without white space.")
    sha256: str = Field(
        description="First 16 hex digits of the sha256 of the passage without white space.",
        json_schema_extra={"pattern": SHA_PATTERN},
    )

    @field_validator("quote")
    @classmethod
    def _quote(cls, v: str) -> str:
        return _check(TEXT_PATTERN, v, "quote")

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        return _check(SHA_PATTERN, v, "sha256")


class Case(BaseModel):
    """One golden case (one JSONL line). Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(
        max_length=ID_MAX_LENGTH,
        description="Globally unique id, e.g. smoke-001 (unique across every dataset file).",
        json_schema_extra={"pattern": ID_PATTERN},
    )
    question: str = Field(
        description="The user's current question.", json_schema_extra={"pattern": TEXT_PATTERN}
    )
    history: list[Turn] = Field(
        default_factory=list,
        description="Earlier turns of a multi-turn conversation, oldest first.",
    )
    golden_answer: str = Field(
        description=(
            "The reference answer a human accepts (for a refusal: what the refusal says)."
        ),
        json_schema_extra={"pattern": TEXT_PATTERN},
    )
    golden_rewrite: str | None = Field(
        default=None,
        description="Multi-turn cases: the standalone question the rewrite step should produce.",
        json_schema_extra={"pattern": TEXT_PATTERN},
    )
    golden_chunk_ids: list[str] = Field(
        default_factory=list,
        description="Chunks that must be retrieved: sample:<path>#<n>.",
        json_schema_extra=_items(CHUNK_ID_PATTERN),
    )
    acceptable_chunk_ids: list[str] = Field(
        default_factory=list,
        description="Chunks that are also acceptable (synonymous content).",
        json_schema_extra=_items(CHUNK_ID_PATTERN),
    )
    must_include: list[str] = Field(
        default_factory=list,
        description="Keywords the answer must contain.",
        json_schema_extra=_items(TEXT_PATTERN),
    )
    must_not_include: list[str] = Field(
        default_factory=list,
        description="Words the answer must never contain (e.g. restricted numbers).",
        json_schema_extra=_items(TEXT_PATTERN),
    )
    acl: list[Group] = Field(min_length=1, description="The simulated user's groups.")
    expected_refusal: bool = Field(
        default=False, description="True when the right answer is a refusal."
    )
    tags: list[str] = Field(
        min_length=1,
        description="Categories, e.g. hr, onboarding, multi-turn, injection.",
        json_schema_extra=_items(TAG_PATTERN),
    )
    difficulty: Difficulty | None = None
    annotator: str = Field(json_schema_extra={"pattern": TEXT_PATTERN})
    annotated_at: str | None = Field(
        default=None,
        description="Date of annotation, YYYY-MM-DD.",
        json_schema_extra={"pattern": DATE_PATTERN},
    )
    reviewed_by: str | None = Field(default=None, json_schema_extra={"pattern": TEXT_PATTERN})
    version: int | None = Field(default=None, ge=1)
    anchors: dict[str, PassageAnchor] = Field(
        default_factory=dict,
        description=(
            "Per labelled chunk id: the passage it pointed at, so the label follows the text "
            "when the knowledge base changes (written by `rag datasets anchor`)."
        ),
        json_schema_extra={"propertyNames": {"pattern": CHUNK_ID_PATTERN}},
    )

    @field_validator(
        "golden_rewrite",
        "difficulty",
        "annotated_at",
        "reviewed_by",
        "version",
        "history",
        "golden_chunk_ids",
        "acceptable_chunk_ids",
        "anchors",
        "must_include",
        "must_not_include",
        "expected_refusal",
        mode="before",
    )
    @classmethod
    def _present_means_not_null(cls, v: Any) -> Any:
        return _not_null(v)

    @field_validator("version", mode="before")
    @classmethod
    def _integral_float(cls, v: Any) -> Any:
        # JSON Schema counts 1.0 as an integer; so do we (but never a bool).
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        return _check(ID_PATTERN, v, "id")

    @field_validator("question", "golden_answer", "annotator", "golden_rewrite", "reviewed_by")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        return None if v is None else _check(TEXT_PATTERN, v, "text")

    @field_validator("golden_chunk_ids", "acceptable_chunk_ids")
    @classmethod
    def _chunk_ids(cls, v: list[str]) -> list[str]:
        for n, item in enumerate(v):
            _check(CHUNK_ID_PATTERN, item, "chunk id", n)
        return v

    @field_validator("anchors")
    @classmethod
    def _anchor_keys(cls, v: dict[str, PassageAnchor]) -> dict[str, PassageAnchor]:
        for key in v:
            _check(CHUNK_ID_PATTERN, key, "chunk id")
        return v

    @field_validator("must_include", "must_not_include")
    @classmethod
    def _keywords(cls, v: list[str]) -> list[str]:
        for n, item in enumerate(v):
            _check(TEXT_PATTERN, item, "keyword", n)
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        for n, item in enumerate(v):
            _check(TAG_PATTERN, item, "tag", n)
        return v

    @field_validator("annotated_at")
    @classmethod
    def _date(cls, v: str | None) -> str | None:
        if v is None:
            return None
        _check(DATE_PATTERN, v, "annotated_at")
        try:  # the pattern passes 2026-13-45: a date no calendar has
            dt.date.fromisoformat(v)
        except ValueError:
            raise PydanticCustomError(
                "string_pattern_mismatch",
                "{what} should be a calendar date",
                _error_context(DATE_PATTERN, "annotated_at", None),
            ) from None
        return v

    @property
    def is_multi_turn(self) -> bool:
        return bool(self.history)


CASE_FIELDS: tuple[str, ...] = tuple(Case.model_fields)


class _CaseJsonSchema(GenerateJsonSchema):
    """The case schema as a JSONL file is written: an optional field is left out, never
    ``null`` (the model refuses a present ``null``), so nullable fields are their inner type;
    no defaults or titles (the file states no default values); a literal is its ``enum``."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        out = super().literal_schema(schema)
        out.pop("type", None)
        return out


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Replace ``{"$ref": "#/$defs/X"}`` by X itself (the case schema has no recursion)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def case_json_schema() -> dict[str, Any]:
    """``case.schema.json``, generated from :class:`Case` (``make schema``)."""
    raw = Case.model_json_schema(schema_generator=_CaseJsonSchema)
    body = _inline(raw, raw.get("$defs", {}))
    body.pop("description", None)
    required = [n for n, f in Case.model_fields.items() if f.is_required()]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://rag-starter.local/schemas/case.schema.json",
        "title": "Golden evaluation case (one JSONL line)",
        "description": (
            "One case of a golden dataset (seed 004 §7.2). Required: "
            + ", ".join(required)
            + ". No other fields than those listed here. Optional fields are omitted rather "
            "than set to null. Generated from app.eval.datasets.case.Case by `make schema` "
            "(scripts/gen_schemas.py) — do not edit."
        ),
        **body,
    }


@dataclass(frozen=True)
class Suite:
    """One dataset file, loaded."""

    name: str
    version: str  # "1.0"
    path: Path
    sha256: str  # of the file's bytes
    cases: list[Case] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.cases)

    def by_id(self, case_id: str) -> Case | None:
        return next((c for c in self.cases if c.id == case_id), None)


def schema_path(root: Path | None = None) -> Path:
    """``case.schema.json`` in the datasets folder."""
    return (root or datasets_dir()) / "case.schema.json"


def parse_file_name(name: str) -> tuple[str, int, int] | None:
    """``smoke_v1.0.jsonl`` -> ``("smoke", 1, 0)``; ``None`` when the name does not fit."""
    m = FILE_NAME_RE.match(name)
    if m is None:
        return None
    return m.group("name"), int(m.group("major")), int(m.group("minor"))


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for every line, 1-based, without line ends or a BOM."""
    if text.startswith("\ufeff"):
        text = text[1:]
    for n, line in enumerate(text.split("\n"), start=1):
        yield n, line.removesuffix("\r")


def _read_text(path: Path) -> tuple[bytes, str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found — check the path") from None
    except IsADirectoryError:
        raise DatasetError(f"{path}: is a folder, not a dataset file") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 text — re-save the file as UTF-8") from None


def load_dataset_file(path: Path | str) -> Suite:
    """Load one ``<name>_v<x.y>.jsonl`` file. Raises :class:`DatasetError` listing every bad line."""
    path = Path(path)
    data, text = _read_text(path)
    cases: list[Case] = []
    problems: list[str] = []
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{n}: not valid JSON ({exc.msg}, column {exc.colno})")
            continue
        except (ValueError, RecursionError) as exc:
            problems.append(f"{path}:{n}: not valid JSON ({str(exc)[:80]})")
            continue
        try:
            cases.append(Case.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            problems.append(f"{path}:{n}: {where}: {first['msg']}")
    if problems:
        shown = "\n".join(problems[:20])
        more = f"\n… and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise DatasetError(
            f"{path}: {len(problems)} bad line(s) — run `rag datasets check {path}` for "
            f"details:\n{shown}{more}"
        )
    return suite_of_file(path, hashlib.sha256(data).hexdigest(), cases)


def suite_of_file(path: Path, sha256: str, cases: list[Case]) -> Suite:
    """The :class:`Suite` of one dataset file: named and versioned by its file name
    (``<name>_v<x.y>.jsonl``; another name: its stem, version 0.0)."""
    parsed = parse_file_name(path.name)
    name, version = (parsed[0], f"{parsed[1]}.{parsed[2]}") if parsed else (path.stem, "0.0")
    return Suite(name=name, version=version, path=path, sha256=sha256, cases=cases)


def available_suites(root: Path | None = None) -> dict[str, list[tuple[tuple[int, int], Path]]]:
    """``{name: [((major, minor), path), …]}`` sorted oldest first."""
    folder = root or datasets_dir()
    found: dict[str, list[tuple[tuple[int, int], Path]]] = {}
    if not folder.is_dir():
        return found
    for file in folder.glob("*.jsonl"):
        parsed = parse_file_name(file.name)
        if parsed:
            found.setdefault(parsed[0], []).append(((parsed[1], parsed[2]), file))
    for versions in found.values():
        versions.sort()
    return found


def load_suite(name: str, version: str | None = None, root: Path | None = None) -> Suite:
    """Load suite ``name`` — the newest version, or exactly ``version`` (``"1.0"``)."""
    suites = available_suites(root)
    versions = suites.get(name)
    if not versions:
        known = ", ".join(sorted(suites)) or "none"
        raise DatasetError(
            f"suite '{name}' not found in {root or datasets_dir()} — known suites: {known}"
        )
    if version is None:
        return load_dataset_file(versions[-1][1])
    for (major, minor), file in versions:
        if f"{major}.{minor}" == version:
            return load_dataset_file(file)
    have = ", ".join(f"{a}.{b}" for (a, b), _ in versions)
    raise DatasetError(f"suite '{name}' has no version {version} — available: {have}")


def suite_stats(suites: list[Suite]) -> dict[str, Any]:
    """Sizes and tag / difficulty distributions of ``suites`` (for ``rag datasets stats``)."""
    rows: list[dict[str, Any]] = []
    tags: dict[str, dict[str, int]] = {}
    for suite in suites:
        difficulty = dict.fromkeys(DIFFICULTIES, 0)
        difficulty["unset"] = 0
        for case in suite.cases:
            difficulty[case.difficulty or "unset"] += 1
            for tag in case.tags:
                tags.setdefault(tag, {}).setdefault(suite.name, 0)
                tags[tag][suite.name] += 1
        rows.append(
            {
                "name": suite.name,
                "version": suite.version,
                "path": suite.path.name,
                "sha256": suite.sha256,
                "cases": len(suite.cases),
                "multi_turn": sum(1 for c in suite.cases if c.history),
                "expected_refusal": sum(1 for c in suite.cases if c.expected_refusal),
                "with_golden_chunks": sum(1 for c in suite.cases if c.golden_chunk_ids),
                "difficulty": difficulty,
            }
        )
    ordered = dict(sorted(tags.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])))
    return {"suites": rows, "total_cases": sum(r["cases"] for r in rows), "tags": ordered}


def load_all_suites(root: Path | None = None) -> list[Suite]:
    """The newest version of every suite, in the order smoke, full, hard, adversarial, others."""
    order = {"smoke": 0, "full": 1, "hard": 2, "adversarial": 3}
    names = sorted(available_suites(root), key=lambda n: (order.get(n, 9), n))
    return [load_suite(name, root=root) for name in names]
