"""The documented input limits, in one place (DESIGN "Input limits"; table in docs/limits.md).

Inside these limits every text step is linear in its input; beyond them the command
refuses with exit 2 and a message naming the limit, before doing the work. A test keeps
docs/limits.md equal to :data:`LIMITS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.errors import UserError
from app.wellformed import first_invalid

__all__ = [
    "LIMITS",
    "Limit",
    "LimitExceeded",
    "case_problems",
    "check_chars",
    "check_history",
    "check_question",
    "check_text",
    "limit",
    "lone_surrogate",
]


@dataclass(frozen=True)
class Limit:
    name: str
    value: int
    unit: str
    applies_to: str


LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit("question_chars", 8_000, "characters", "`rag ask` QUESTION; a case's `question`"),
        Limit("history_turns", 100, "messages", "`rag ask --history`; a case's `history`"),
        Limit("history_turn_chars", 8_000, "characters", "one history message's `content`"),
        Limit("history_file_bytes", 2_000_000, "bytes", "the `--history` file"),
        Limit("vars_file_bytes", 2_000_000, "bytes", "the `rag prompts render --vars-file` file"),
        Limit("variable_chars", 100_000, "characters", "one `rag prompts render --var` value"),
        Limit("dataset_line_bytes", 256_000, "bytes", "one JSONL line of a dataset"),
        Limit(
            "dataset_file_bytes",
            50_000_000,
            "bytes",
            "one dataset file read whole (the editor, new versions); "
            "`rag datasets check` and `rag eval run` read it line by line",
        ),
        Limit("dataset_cases", 1_000_000, "cases", "one dataset file"),
        Limit("prompt_file_bytes", 512_000, "bytes", "one prompt module"),
        Limit("kb_file_bytes", 5_000_000, "bytes", "one knowledge-base document (`*.md`)"),
        Limit("prompt_concat_terms", 200, "terms", "`+` terms in one prompt-module literal"),
        Limit("prompt_nesting", 20, "levels", "list/dict nesting in one prompt-module literal"),
        Limit("prompt_format_width", 1_000, "characters", "a width/precision in a `{name:spec}`"),
        Limit("toml_file_bytes", 1_000_000, "bytes", "`releases.toml` / `prompts.lock`"),
        Limit(
            "report_file_bytes",
            500_000_000,
            "bytes",
            "one report JSON read whole (any report not in the one-case-per-line layout; "
            "`rag report md`, the viewer's compare pages)",
        ),
        Limit(
            "report_line_bytes",
            200_000_000,
            "bytes",
            "one line of a report in the one-case-per-line layout `rag eval run` writes "
            "(streamed: no file-size limit)",
        ),
        Limit(
            "report_cases",
            2_000_000,
            "cases",
            "cases in one report read as a stream (`rag eval compare`, `rag view`, "
            "`rag report html`)",
        ),
    )
}


def limit(name: str) -> int:
    """The value of the named limit."""
    return LIMITS[name].value


class LimitExceeded(UserError):
    """An input over one of the documented limits."""


def check_chars(text: str, name: str, what: str) -> None:
    """Refuse ``text`` when it is longer than the limit ``name``."""
    cap = LIMITS[name]
    if len(text) > cap.value:
        raise LimitExceeded(
            f"{what}: {len(text):,} {cap.unit} is over the limit of {cap.value:,} "
            f"({cap.name}) — shorten it (limits: docs/limits.md)"
        )


def check_text(text: str, name: str, what: str) -> None:
    """Refuse ``text`` over the limit ``name`` or holding a lone surrogate (O(n))."""
    check_chars(text, name, what)
    at = lone_surrogate(text)
    if at is not None:
        raise LimitExceeded(
            f"{what}: character {at + 1} is a lone surrogate ({text[at]!r}), not text — "
            "the input was not valid UTF-8; re-type or re-encode it"
        )


def check_question(text: str, what: str = "the question") -> None:
    """Refuse a question over ``question_chars`` or holding a lone surrogate (cheap: O(n))."""
    check_text(text, "question_chars", what)


def check_history(contents: list[str], what: str = "the history") -> None:
    """Refuse a history over ``history_turns`` messages or a message over
    ``history_turn_chars``, or one holding a lone surrogate."""
    cap = LIMITS["history_turns"]
    if len(contents) > cap.value:
        raise LimitExceeded(
            f"{what}: {len(contents):,} messages is over the limit of {cap.value:,} "
            f"({cap.name}) — keep the last turns that matter (limits: docs/limits.md)"
        )
    for i, content in enumerate(contents, 1):
        check_text(content, "history_turn_chars", f"{what}: message {i}")


def markdown_table() -> str:
    """The table docs/limits.md holds (a test compares them)."""
    rows = ["| limit | value | applies to |", "|---|---:|---|"]
    rows += [f"| `{x.name}` | {x.value:,} {x.unit} | {x.applies_to} |" for x in LIMITS.values()]
    return "\n".join(rows)


#: the index of the first lone surrogate in a text, or None (:mod:`app.wellformed`'s rule)
lone_surrogate = first_invalid


#: a JSON escape of a surrogate code point (U+D800–U+DFFF); a line decoded as strict UTF-8
#: can hold a lone surrogate only through one
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def case_problems(obj: dict[str, object], line: str | None = None) -> list[tuple[str, str, str]]:
    """(field, problem, fix) for a dataset case over the limits or holding lone surrogates.

    ``line``: the JSON text ``obj`` was parsed from, decoded as strict UTF-8; without a
    surrogate escape in it no string of ``obj`` can hold a lone surrogate, and the walk over
    every key and string is skipped."""
    out: list[tuple[str, str, str]] = []
    question = obj.get("question")
    cap = LIMITS["question_chars"].value
    if isinstance(question, str) and len(question) > cap:
        out.append(
            ("question", f"{len(question):,} characters is over the limit of {cap:,}",
             "shorten the question (limits: docs/limits.md)")
        )  # fmt: skip
    history = obj.get("history")
    if isinstance(history, list):
        turns = LIMITS["history_turns"].value
        if len(history) > turns:
            out.append(
                ("history", f"{len(history):,} messages is over the limit of {turns:,}",
                 "keep the last turns that matter (limits: docs/limits.md)")
            )  # fmt: skip
        chars = LIMITS["history_turn_chars"].value
        for i, turn in enumerate(history[: turns + 1]):
            content = turn.get("content") if isinstance(turn, dict) else None
            if isinstance(content, str) and len(content) > chars:
                out.append(
                    (f"history[{i}].content", f"{len(content):,} characters is over the limit "
                     f"of {chars:,}", "shorten the message (limits: docs/limits.md)")
                )  # fmt: skip
    if line is not None and _SURROGATE_ESCAPE.search(line) is None:
        return out  # no surrogate escape in the line: no lone surrogate anywhere in obj
    if _valid_unicode(obj):  # the usual case: no string to locate
        return out
    for where, text in _strings(obj, ""):
        at = lone_surrogate(text)
        if at is not None:
            out.append(
                (where or "(key)", f"holds a lone surrogate {text[at]!r} at character {at + 1}, "
                 "which is not valid Unicode text", "remove the \\ud800-style escape or write "
                 "the character itself")
            )  # fmt: skip
    return out


def _valid_unicode(value: object) -> bool:
    """Whether every key and string inside ``value`` encodes as UTF-8 (no lone surrogate):
    :func:`_strings`'s walk without building a field path for each string."""
    stack: list[object] = [value]
    try:
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                item.encode("utf-8")
            elif isinstance(item, dict):
                for k, v in item.items():
                    str(k).encode("utf-8")
                    stack.append(v)
            elif isinstance(item, list):
                stack.extend(item)
    except UnicodeEncodeError:
        return False
    return True


def _strings(value: object, where: str) -> list[tuple[str, str]]:
    """Every key and string value inside ``value`` with its field path (iterative)."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            out.append((path, item))
        elif isinstance(item, dict):
            for k, v in item.items():
                sub = f"{path}.{k}" if path else str(k)
                out.append((sub, str(k)))
                stack.append((v, sub))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return out
