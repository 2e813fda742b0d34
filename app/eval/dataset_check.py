"""``rag datasets check``: read every line of every dataset file and say what is wrong.

Business experts edit the JSONL files by hand, so the checker

* reads every line of every file and never stops at the first problem;
* names ``file:line: field:`` and says in plain words what is wrong and how to fix it;
* tolerates (with a warning) a UTF-8 BOM, CRLF line ends and blank lines;
* exits 0 when clean, 1 when any error was found, 2 when input cannot be read
  (missing file or folder, not UTF-8, no schema, an unknown git revision).

What it checks, per line: JSON syntax (with the column), duplicate keys, the case schema
(``case.schema.json``: missing / mistyped / unknown fields — with the closest known name),
ids unique within and across files, chunk ids that resolve in the knowledge base (with
the closest existing id), golden chunks the case's ``acl`` may read, no golden chunks on an
expected refusal, ``must_include`` words present in the golden chunks (warning), and a
``golden_rewrite`` on multi-turn cases (warning). Per file: the name
``<name>_v<major>.<minor>.jsonl``. With ``--changed-since REV`` (seed 004 §11.3): a changed
dataset needs a CHANGELOG.md entry, and a file that existed at ``REV`` is released — it
must not be edited in place.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.errors import DatasetError
from app.eval.datasets import FILE_NAME_RE, schema_path
from app.limits import case_problems, limit
from app.paths import datasets_dir, kb_dir
from app.retrieval.kb import KnowledgeBase, can_read, load_kb
from app.safe_io import UnsafeInput, is_dir, list_files, read_bytes
from app.text.match import contains_any

Severity = Literal["error", "warning"]

# jsonschema ships no type stubs; reach it through importlib so mypy treats it as Any.
_jsonschema: Any = importlib.import_module("jsonschema")

__all__ = ["CheckResult", "Issue", "check_paths", "default_paths"]

_FIELD_HINTS: dict[str, str] = {
    "id": 'a short unique name such as "full-042" (letters, digits, "-", "_", ".")',
    "question": "the user's question as text",
    "history": 'a list of turns like [{"role": "user", "content": "…"}, {"role": "assistant", "content": "…"}]',
    "golden_answer": "the answer a person would accept, as text",
    "golden_rewrite": "the stand-alone question the rewrite step should produce, as text",
    "golden_chunk_ids": 'a list of chunk ids like ["sample:hr/onboarding.md#1"]',
    "acceptable_chunk_ids": 'a list of chunk ids like ["sample:hr/onboarding.md#1"]',
    "must_include": 'a list of words, e.g. ["身份证", "体检报告"]',
    "must_not_include": 'a list of words, e.g. ["15000"]',
    "acl": 'a list of groups, e.g. ["employee"] (groups: public, employee, hr, finance, exec)',
    "expected_refusal": "true or false (no quotes)",
    "tags": 'a list of lower-case tags, e.g. ["hr", "onboarding"]',
    "difficulty": '"easy", "medium" or "hard"',
    "annotator": 'the annotator\'s user name, e.g. "zhangsan"',
    "annotated_at": 'a date written "YYYY-MM-DD", e.g. "2026-04-01"',
    "reviewed_by": 'the reviewer\'s user name, e.g. "lisi"',
    "version": "a whole number from 1 (no quotes)",
}
_TYPE_WORDS = {
    "string": "a text in double quotes",
    "array": "a list in square brackets [ … ]",
    "object": "an object in curly braces { … }",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "null": "null",
}
_JSON_FIXES: list[tuple[str, str]] = [
    (
        "Expecting property name",
        'put every field name in double quotes and remove a comma before "}"',
    ),
    ("Expecting ',' delimiter", 'add the missing comma between two fields, or close a text with "'),
    ("Expecting ':' delimiter", 'write a colon between a field name and its value: "field": value'),
    ("Unterminated string", 'close the text with a double quote "'),
    ("Invalid control character", r"a line break or tab inside a text: write it as \n or \t"),
    ("Invalid \\escape", r"a backslash inside a text: write it as \\ (two backslashes)"),
    (
        "Extra data",
        "one case per line: remove the extra text after the closing }, or split the line",
    ),
    (
        "Expecting value",
        "a value is missing, or a text is not in double quotes (use \"…\", not 「…」 or '…')",
    ),
]


@dataclass(frozen=True)
class Issue:
    """One problem: where, which field, what is wrong, how to fix it."""

    file: str
    line: int | None
    field: str
    message: str
    fix: str
    severity: Severity = "error"
    code: str = "invalid"

    def format(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        label = "" if self.severity == "error" else "warning: "
        what = f"{self.field}: " if self.field else ""
        return f"{where}: {label}{what}{self.message} — {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckResult:
    issues: list[Issue] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # display path -> number of cases
    fatal: bool = False  # some input could not be read

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def exit_code(self) -> int:
        if self.fatal:
            return 2
        return 1 if self.errors else 0

    def summary(self) -> str:
        cases = sum(self.files.values())
        return (
            f"checked {len(self.files)} file(s), {cases} case(s): {len(self.errors)} error(s), "
            f"{len(self.warnings)} warning(s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "files": [{"path": p, "cases": n} for p, n in self.files.items()],
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "issues": [i.to_dict() for i in self.issues],
        }


def _show(value: Any, limit: int = 40) -> str:
    """A short, printable rendering of a value for a message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - values come from json.loads
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _display(path: Path) -> str:
    try:  # realpath: Path.resolve raises on a symlink loop
        return Path(os.path.realpath(path)).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def default_paths(root: Path | None = None) -> list[Path]:
    """Every ``*.jsonl`` in the datasets folder."""
    folder = root or datasets_dir()
    return sorted(folder.glob("*.jsonl"))


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return "a text"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def _field_label(path: Sequence[Any]) -> str:
    label = ""
    for part in path:
        label += f"[{part}]" if isinstance(part, int) else (f".{part}" if label else str(part))
    return label


class _DuplicateKeys(dict[str, Any]):
    """A JSON object that remembers keys given twice."""

    duplicates: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = _DuplicateKeys()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


class Checker:
    """Checks files one after another, remembering ids across files."""

    def __init__(
        self, schema: dict[str, Any], kb: KnowledgeBase | None, result: CheckResult
    ) -> None:
        self.validator = _jsonschema.Draft202012Validator(schema)
        self.known_fields: list[str] = list(schema.get("properties", {}))
        self.turn_fields: list[str] = list(
            schema.get("properties", {}).get("history", {}).get("items", {}).get("properties", {})
        )
        self.kb = kb
        self.chunk_ids: list[str] = [c.chunk_id for c in kb.chunks] if kb else []
        self.result = result
        self.seen_ids: dict[str, str] = {}  # id -> "file:line"

    # ------------------------------------------------------------------ helpers
    def add(
        self,
        file: str,
        line: int | None,
        fld: str,
        message: str,
        fix: str,
        severity: Severity = "error",
        code: str = "invalid",
    ) -> None:
        self.result.issues.append(Issue(file, line, fld, message, fix, severity, code))

    # ------------------------------------------------------------------ files
    def check_file(self, path: Path) -> None:
        shown = _display(path)
        try:  # special files, loops and oversized files are refused before reading
            data = read_bytes(path, max_bytes=limit("dataset_file_bytes"), what="dataset file")
        except UnsafeInput as exc:
            self.add(shown, exc.line, "", exc.problem, exc.fix, code="unreadable")
            self.result.fatal = True
            return
        if FILE_NAME_RE.match(path.name) is None:
            self.add(
                shown,
                None,
                "",
                f"file name {path.name!r} does not follow <name>_v<major>.<minor>.jsonl",
                "rename it, e.g. smoke_v1.0.jsonl (lower-case name, then _v, then two numbers)",
                code="file-name",
            )
        self.result.files[shown] = 0
        raw_lines = data.split(b"\n")
        if raw_lines and raw_lines[-1] == b"":
            raw_lines.pop()  # the newline that ends the last line
        if not raw_lines:
            self.add(
                shown,
                None,
                "",
                "the file is empty",
                "add at least one case, one JSON object per line",
                severity="warning",
                code="empty-file",
            )
            return
        crlf_reported = False
        blank_lines: list[int] = []
        for number, raw in enumerate(raw_lines, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
                self.add(
                    shown,
                    1,
                    "",
                    "the file starts with a byte-order mark (BOM)",
                    "tolerated; to remove it save the file as 'UTF-8' (not 'UTF-8 with BOM')",
                    severity="warning",
                    code="bom",
                )
            if raw.endswith(b"\r"):
                raw = raw[:-1]
                if not crlf_reported:
                    crlf_reported = True
                    self.add(
                        shown,
                        number,
                        "",
                        "Windows line ends (CRLF) from here on",
                        "tolerated; set your editor to 'LF' line ends to keep diffs clean",
                        severity="warning",
                        code="crlf",
                    )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.add(
                    shown,
                    number,
                    "",
                    f"not UTF-8 text (bad byte at column {exc.start + 1})",
                    "re-save the file with the encoding 'UTF-8'",
                    code="unreadable",
                )
                self.result.fatal = True
                continue
            if not text.strip():
                blank_lines.append(number)
                continue
            if len(raw) > limit("dataset_line_bytes"):
                self.add(
                    shown,
                    number,
                    "",
                    f"the line is {len(raw):,} bytes, over the limit of "
                    f"{limit('dataset_line_bytes'):,}",
                    "shorten the case's texts (limits: docs/limits.md); the line was not checked",
                    code="line-too-long",
                )
                continue
            if self.check_line(shown, number, text):
                self.result.files[shown] += 1
        if blank_lines:
            where = ", ".join(str(n) for n in blank_lines[:10]) + (
                " …" if len(blank_lines) > 10 else ""
            )
            self.add(
                shown,
                blank_lines[0],
                "",
                f"blank line(s) ignored (line {where})",
                "tolerated; delete empty lines so every line is one case",
                severity="warning",
                code="blank-line",
            )

    # ------------------------------------------------------------------ lines
    def check_line(self, file: str, line: int, text: str) -> bool:
        """Check one non-blank line. Returns True when it parsed as a JSON object."""
        try:
            obj = json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            fix = next(
                (f for key, f in _JSON_FIXES if exc.msg.startswith(key)),
                "fix the JSON syntax at that column",
            )
            self.add(
                file, line, "", f"not valid JSON: {exc.msg} at column {exc.colno}", fix, code="json"
            )
            return False
        except (ValueError, RecursionError) as exc:
            self.add(
                file,
                line,
                "",
                f"not valid JSON: {str(exc)[:80]}",
                "use plain JSON: texts in double quotes, numbers, true/false, lists and objects",
                code="json",
            )
            return False
        if not isinstance(obj, dict):
            self.add(
                file,
                line,
                "",
                f"the line is {_type_name(obj)}, not one case",
                'write one case per line as an object: {"id": "…", "question": "…", …}',
                code="json",
            )
            return False
        for key in getattr(obj, "duplicates", []):
            self.add(
                file,
                line,
                key,
                "this field is given twice on the line",
                "keep only one of them (the last one would win silently)",
                code="duplicate-field",
            )
        for fld, problem, fix in case_problems(obj):
            self.add(file, line, fld, problem, fix, code="limit")
        self.check_schema(file, line, obj)
        self.check_semantics(file, line, obj)
        return True

    def check_schema(self, file: str, line: int, obj: dict[str, Any]) -> None:
        try:
            errors = sorted(
                self.validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]
            )
        except RecursionError:
            self.add(
                file,
                line,
                "",
                "the case is nested too deeply to check",
                "remove the nested lists/objects; see case.schema.json",
                code="schema",
            )
            return
        for err in errors:
            self.schema_issue(file, line, err)

    def schema_issue(self, file: str, line: int, err: Any) -> None:
        path = list(err.absolute_path)
        label = _field_label(path)
        top = str(path[0]) if path else ""
        hint = _FIELD_HINTS.get(top, "see tests/eval/datasets/case.schema.json")
        kind = err.validator
        if kind == "required":
            missing = [
                k
                for k in (err.validator_value or [])
                if isinstance(err.instance, dict) and k not in err.instance
            ]
            for name in missing:
                where = f"{label}.{name}" if label else str(name)
                field_hint = hint if label else _FIELD_HINTS.get(str(name), "see case.schema.json")
                self.add(
                    file,
                    line,
                    where,
                    "required field is missing",
                    f"add it: {field_hint}",
                    code="missing-field",
                )
            return
        if kind == "additionalProperties":
            allowed = self.turn_fields if label else self.known_fields
            extra = (
                [k for k in err.instance if k not in allowed]
                if isinstance(err.instance, dict)
                else []
            )
            for name in extra:
                where = f"{label}.{name}" if label else name
                close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
                if close:
                    fix = f"did you mean '{close[0]}'? Rename it"
                else:
                    fix = f"remove it; allowed fields are {', '.join(allowed)}"
                self.add(
                    file, line, where, f"unknown field {_show(name)}", fix, code="unknown-field"
                )
            return
        if kind == "type":
            expected = err.validator_value
            names = [expected] if isinstance(expected, str) else list(expected)
            want = " or ".join(_TYPE_WORDS.get(n, n) for n in names)
            self.add(
                file,
                line,
                label or "line",
                f"is {_type_name(err.instance)} ({_show(err.instance)}) but must be {want}",
                f"write it as {hint}" if len(path) == 1 else f"write it as {want}",
                code="wrong-type",
            )
            return
        if kind == "enum":
            options = [str(o) for o in err.validator_value]
            close = difflib.get_close_matches(str(err.instance), options, n=1, cutoff=0.5)
            fix = f"use one of {', '.join(options)}" + (
                f" (did you mean '{close[0]}'?)" if close else ""
            )
            self.add(
                file, line, label, f"{_show(err.instance)} is not allowed", fix, code="bad-value"
            )
            return
        if kind == "pattern":
            if top in {"golden_chunk_ids", "acceptable_chunk_ids"}:
                msg, fix = (
                    f"{_show(err.instance)} is not a chunk id",
                    'write chunk ids as "sample:<path>#<n>", e.g. "sample:hr/onboarding.md#1"',
                )
            elif top == "id":
                msg, fix = (
                    f"{_show(err.instance)} is not a usable id",
                    "use letters, digits, '-', '_' or '.', starting with a letter or digit, e.g. full-042",
                )
            elif top == "tags":
                msg, fix = (
                    f"{_show(err.instance)} is not a usable tag",
                    "use lower-case letters, digits and '-', e.g. multi-turn",
                )
            elif top == "annotated_at":
                msg, fix = (
                    f"{_show(err.instance)} is not a date",
                    'write the date as "YYYY-MM-DD", e.g. "2026-04-01"',
                )
            else:
                msg, fix = "is empty", "write the text, or leave the field out if it is optional"
            self.add(file, line, label, msg, fix, code="bad-value")
            return
        if kind == "minItems":
            self.add(
                file,
                line,
                label,
                "is an empty list",
                f"list at least one item: {hint}",
                code="bad-value",
            )
            return
        if kind == "maxLength":
            self.add(
                file,
                line,
                label,
                f"is longer than {err.validator_value} characters",
                "shorten it",
                code="bad-value",
            )
            return
        if kind == "minimum":
            self.add(
                file,
                line,
                label,
                f"{_show(err.instance)} is too small",
                f"use {hint}",
                code="bad-value",
            )
            return
        self.add(
            file,
            line,
            label or "line",
            err.message[:120],
            f"see case.schema.json ({hint})",
            code="schema",
        )

    # ------------------------------------------------------------------ meaning
    def check_semantics(self, file: str, line: int, obj: dict[str, Any]) -> None:
        case_id = obj.get("id")
        if isinstance(case_id, str) and case_id:
            first = self.seen_ids.get(case_id)
            if first is not None:
                self.add(
                    file,
                    line,
                    "id",
                    f"{_show(case_id)} is already used at {first}",
                    "give this case a new id; ids are unique across all dataset files",
                    code="duplicate-id",
                )
            else:
                self.seen_ids[case_id] = f"{file}:{line}"

        acl = obj.get("acl")
        acl_ok = isinstance(acl, list) and bool(acl) and all(isinstance(a, str) for a in acl)
        golden = obj.get("golden_chunk_ids")
        golden_list = golden if isinstance(golden, list) else []
        texts: list[str] = []
        for fld in ("golden_chunk_ids", "acceptable_chunk_ids"):
            ids = obj.get(fld)
            if not isinstance(ids, list):
                continue
            for n, chunk_id in enumerate(ids):
                if not isinstance(chunk_id, str) or self.kb is None:
                    continue
                chunk = self.kb.chunk(chunk_id)
                label = f"{fld}[{n}]"
                if chunk is None:
                    self.add(
                        file,
                        line,
                        label,
                        f"chunk {_show(chunk_id, 60)} does not exist in the knowledge base",
                        self._chunk_fix(chunk_id),
                        code="unknown-chunk",
                    )
                    continue
                if fld == "golden_chunk_ids":
                    texts.append(chunk.text)
                if acl_ok and isinstance(acl, list) and not can_read(acl, chunk.acl):
                    self.add(
                        file,
                        line,
                        label,
                        f"the case's acl {_show(acl)} may not read {chunk_id} (readable by {', '.join(chunk.acl)})",
                        f"give the case an acl that includes {chunk.acl[0]!r}, or pick a chunk this user may "
                        "read; to test a refusal set expected_refusal to true and remove the chunk",
                        code="acl",
                    )

        refusal = obj.get("expected_refusal")
        if refusal is True and golden_list:
            self.add(
                file,
                line,
                "expected_refusal",
                "is true but the case lists golden_chunk_ids",
                "a refused question has nothing to retrieve: remove golden_chunk_ids, or set "
                "expected_refusal to false",
                code="refusal-with-chunks",
            )
        if refusal is not True and isinstance(golden, list | type(None)) and not golden_list:
            self.add(
                file,
                line,
                "golden_chunk_ids",
                "an answerable case lists no golden chunks",
                "add the chunk id(s) that contain the answer, or set expected_refusal to true",
                severity="warning",
                code="no-chunks",
            )

        must = obj.get("must_include")
        if texts and isinstance(must, list):
            for n, word in enumerate(must):
                if isinstance(word, str) and word.strip() and not contains_any(texts, word):
                    self.add(
                        file,
                        line,
                        f"must_include[{n}]",
                        f"{_show(word)} does not appear in the golden chunk(s)",
                        "use the exact wording of the document, or fix golden_chunk_ids",
                        severity="warning",
                        code="keyword-not-in-chunk",
                    )
        must_not = obj.get("must_not_include")
        if isinstance(must, list) and isinstance(must_not, list):
            for word in must_not:
                if isinstance(word, str) and word in must:
                    self.add(
                        file,
                        line,
                        "must_not_include",
                        f"{_show(word)} is also in must_include",
                        "a word cannot be both required and forbidden; remove it from one list",
                        code="contradiction",
                    )
        history = obj.get("history")
        rewrite = obj.get("golden_rewrite")
        if isinstance(history, list) and history and rewrite is None:
            self.add(
                file,
                line,
                "golden_rewrite",
                "a multi-turn case has no golden_rewrite",
                "add the stand-alone question the rewrite step should produce",
                severity="warning",
                code="no-rewrite",
            )
        if isinstance(rewrite, str) and not history:
            self.add(
                file,
                line,
                "golden_rewrite",
                "is set but the case has no history",
                "add the earlier turns in history, or remove golden_rewrite",
                severity="warning",
                code="rewrite-without-history",
            )

    def _chunk_fix(self, chunk_id: str) -> str:
        if self.kb is None or not self.chunk_ids:
            return "check the knowledge base"
        doc = chunk_id.split("#", 1)[0]
        same_doc = [c for c in self.kb.chunks if c.chunk_id.split("#", 1)[0] == doc]
        if same_doc:
            listing = "; ".join(f"#{c.index} {c.heading or c.title}" for c in same_doc[:8])
            more = " …" if len(same_doc) > 8 else ""
            return f"this document has chunks #0 to #{len(same_doc) - 1}: {listing}{more}"
        close = difflib.get_close_matches(chunk_id, self.chunk_ids, n=1, cutoff=0.5)
        if close:
            return f"did you mean '{close[0]}'?"
        return 'write it as "sample:<path>#<n>" with a path under tests/eval/kb/sample/'


# ---------------------------------------------------------------------- git rules
def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _first_difference(old: str, new: str) -> int:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for n, (a, b) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if a != b:
            return n
    return min(len(old_lines), len(new_lines)) + 1


def check_changed_since(rev: str, folder: Path, result: CheckResult) -> None:
    """The seed 004 §11.3 rules against git revision ``rev``."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise DatasetError(f"{folder}: not inside a git repository — --changed-since needs git")
    root = Path(top.stdout.strip())
    if _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        raise DatasetError(
            f"--changed-since {rev}: unknown git revision — use a branch, tag or commit"
        )
    rel = folder.resolve().relative_to(root.resolve()).as_posix()
    changed = set(_git(root, "diff", "--name-only", rev, "--", rel).stdout.split())
    changed |= set(
        _git(root, "ls-files", "--others", "--exclude-standard", "--", rel).stdout.split()
    )
    datasets = sorted(p for p in changed if p.endswith(".jsonl"))
    changelog = f"{rel}/CHANGELOG.md"
    if datasets and changelog not in changed:
        names = ", ".join(Path(p).name for p in datasets)
        result.issues.append(
            Issue(
                _display(root / changelog),
                None,
                "",
                f"dataset file(s) changed since {rev} ({names}) but CHANGELOG.md did not",
                "add an entry: which file, which version, what changed and why",
                "error",
                "changelog",
            )
        )
    for name in datasets:
        old = _git(root, "show", f"{rev}:{name}")
        if old.returncode != 0:
            continue  # a new file: fine
        path = root / name
        shown = _display(path)
        if not path.exists():
            result.issues.append(
                Issue(
                    shown,
                    None,
                    "",
                    f"released dataset deleted since {rev}",
                    f"keep released versions; restore it with `git checkout {rev} -- {name}`",
                    "error",
                    "released-edited",
                )
            )
            continue
        new = path.read_text(encoding="utf-8", errors="replace")
        if new == old.stdout:
            continue
        parsed = FILE_NAME_RE.match(path.name)
        if parsed is None:
            continue  # the file name error is reported by the file check
        nxt_minor = f"{parsed.group('name')}_v{parsed.group('major')}.{int(parsed.group('minor')) + 1}.jsonl"
        nxt_major = f"{parsed.group('name')}_v{int(parsed.group('major')) + 1}.0.jsonl"
        result.issues.append(
            Issue(
                shown,
                _first_difference(old.stdout, new),
                "",
                f"released file edited in place (it existed at {rev} with other content)",
                f"restore it (`git checkout {rev} -- {name}`) and make the change in {nxt_minor} "
                f"(cases added or fixed) or {nxt_major} (cases deleted, acl meaning changed), with a CHANGELOG entry",
                "error",
                "released-edited",
            )
        )


# ---------------------------------------------------------------------- entry point
def _load_schema(path: Path) -> dict[str, Any]:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(
            f"{path}: case schema not found — restore tests/eval/datasets/case.schema.json"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: case schema cannot be read ({exc})") from None
    if not isinstance(schema, dict):
        raise DatasetError(f"{path}: case schema must be a JSON object")
    return schema


def check_paths(
    paths: Iterable[Path] | None = None,
    *,
    folder: Path | None = None,
    kb_root: Path | None = None,
    schema: Path | None = None,
    changed_since: str | None = None,
    kb: KnowledgeBase | None = None,
) -> CheckResult:
    """Check dataset files (default: every ``*.jsonl`` in ``folder``) and return all issues.

    Never raises for problems inside the files; raises :class:`DatasetError` only when the
    schema itself or the git revision cannot be used. ``kb`` may be passed pre-loaded.
    """
    folder = folder or datasets_dir()
    result = CheckResult()
    schema_doc = _load_schema(schema or schema_path(folder))
    kb_path = kb_root or kb_dir()
    try:
        kb = kb or load_kb(kb_path, name="sample")
    except DatasetError as exc:
        result.issues.append(
            Issue(
                _display(kb_path),
                None,
                "",
                f"knowledge base cannot be loaded: {exc}",
                "fix the document named above; chunk ids were not checked",
                "error",
                "kb",
            )
        )
        result.fatal = True
    checker = Checker(schema_doc, kb, result)
    files: list[Path] = []
    given = list(paths) if paths is not None else None
    if not given:
        if not folder.is_dir():
            raise DatasetError(f"{folder}: datasets folder not found")
        files = default_paths(folder)
    else:
        for p in given:
            if is_dir(p):
                try:  # an empty folder is an input error, not "0 files checked, ok"
                    files.extend(list_files(p, "*.jsonl", what="dataset files"))
                except UnsafeInput as exc:
                    result.issues.append(
                        Issue(_display(p), None, "", exc.problem, exc.fix, "error", "unreadable")
                    )
                    result.fatal = True
            else:
                files.append(p)
    if not files and not result.fatal:
        shown = _display(folder) if not given else ", ".join(_display(p) for p in given)
        result.issues.append(
            Issue(shown, None, "", "no dataset file to check", "point at *.jsonl files",
                  "error", "unreadable")
        )  # fmt: skip
        result.fatal = True
    seen: set[str] = set()
    for file in files:
        key = os.path.realpath(file)  # never raises on a symlink loop (Path.resolve does)
        if key in seen:
            continue
        seen.add(key)
        checker.check_file(file)
    if changed_since:
        check_changed_since(changed_since, folder, result)
    return result
