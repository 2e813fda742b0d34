"""What ``rag datasets check`` finds: :class:`Issue`, :class:`CheckResult` and the per-file
:class:`Sink` the checking layers report into (in the language of the run)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.eval.datasets.hints import Place, hint
from app.eval.datasets.messages import Lang, say

Severity = Literal["error", "warning"]

__all__ = ["CheckResult", "Issue", "Severity", "Sink", "display", "show", "type_name"]


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
    lang: Lang = "en"

    def format(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        label = "" if self.severity == "error" else say("warning", self.lang)
        what = f"{self.field}: " if self.field else ""
        return f"{where}: {label}{what}{self.message}{say('sep', self.lang)}{self.fix}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("lang")
        return data


@dataclass
class CheckResult:
    issues: list[Issue] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # display path -> number of cases
    fatal: bool = False  # some input could not be read
    lang: Lang = "en"
    #: where the expert writes the cases ("jsonl", "editor" or "sheet"): hints match it
    place: Place = "jsonl"
    #: each checked file's valid cases as an index (app.eval.datasets.index.CaseIndex), by
    #: real path: the run reads its cases through it instead of parsing the file twice
    loaded: dict[str, Any] = field(default_factory=dict, repr=False)

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
        return say(
            "summary",
            self.lang,
            files=len(self.files),
            cases=sum(self.files.values()),
            errors=len(self.errors),
            warnings=len(self.warnings),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "lang": self.lang,
            "files": [{"path": p, "cases": n} for p, n in self.files.items()],
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "issues": [i.to_dict() for i in self.issues],
        }


@dataclass
class Sink:
    """Collects the issues of one file (``file`` is its display path)."""

    file: str
    result: CheckResult

    @property
    def lang(self) -> Lang:
        return self.result.lang

    def say(self, key: str, **values: object) -> str:
        return say(key, self.lang, **values)

    def hint(self, field: str) -> str:
        """What ``field`` holds, in the format of the place the cases are written."""
        return hint(field, self.lang, self.result.place)

    def add_text(self, line: int | None, fld: str, message: str, fix: str, /, *, code: str) -> None:
        """Report an error whose words were made elsewhere (e.g. by :mod:`app.safe_io`)."""
        self.result.issues.append(
            Issue(self.file, line, fld, message, fix, "error", code, self.lang)
        )

    def add(
        self,
        line: int | None,
        fld: str,
        key: str,
        /,
        *,
        code: str,
        severity: Severity = "error",
        fix: str | None = None,
        **values: object,
    ) -> None:
        """Report message ``key`` with fix ``fix`` (default: the text ``key + ".fix"``)."""
        message = say(key, self.lang, **values)
        fix_text = fix if fix is not None else say(f"{key}.fix", self.lang, **values)
        self.result.issues.append(
            Issue(
                self.file,
                line,
                fld,  # raw: a field named by a lone surrogate stays that field
                _printable(message),
                _printable(fix_text),
                severity,
                code,
                self.lang,
            )
        )


def _printable(text: str) -> str:
    """``text`` with anything that cannot be written as UTF-8 (a lone surrogate) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def show(value: Any, limit: int = 40) -> str:
    """A short, printable rendering of a value for a message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - values come from json.loads
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def type_name(value: Any, lang: Lang) -> str:
    if isinstance(value, bool):
        key = "bool"
    elif isinstance(value, str):
        key = "text"
    elif isinstance(value, int | float):
        key = "number"
    elif isinstance(value, list):
        key = "list"
    elif isinstance(value, dict):
        key = "dict"
    elif value is None:
        key = "null"
    else:  # pragma: no cover - values come from json.loads
        return type(value).__name__
    return say(f"type.{key}", lang)


def display(path: Path) -> str:
    try:  # realpath: Path.resolve raises on a symlink loop
        return Path(os.path.realpath(path)).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()
