"""The case's fields, checked by the model the harness loads: pydantic's ``Case`` errors
(``loc`` / ``type``) translated into words a business expert can act on.

The rules themselves live only on :class:`app.eval.datasets.case.Case`; this module never
re-states them, it only says in plain words what an error ``type`` at a ``loc`` means.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from app.eval.datasets.case import CASE_FIELDS, Case, Turn
from app.eval.datasets.issues import Sink, show, type_name

__all__ = ["check_fields", "field_label"]

_TURN_FIELDS: tuple[str, ...] = tuple(Turn.model_fields)
_REQUIRED = frozenset(n for n, f in Case.model_fields.items() if f.is_required())
_TYPE_OF_ERROR = {
    "string_type": "string",
    "list_type": "array",
    "bool_type": "boolean",
    "int_type": "integer",
    "model_type": "object",
    "dict_type": "object",
}
# which message a pattern mismatch gets, by top-level field
_PATTERN_MESSAGE = {
    "id": "bad-id",
    "golden_chunk_ids": "bad-chunk-id",
    "acceptable_chunk_ids": "bad-chunk-id",
    "tags": "bad-tag",
    "annotated_at": "bad-date",
}


def field_label(path: Sequence[Any]) -> str:
    """``("history", 0, "role")`` -> ``history[0].role``."""
    label = ""
    for part in path:
        label += f"[{part}]" if isinstance(part, int) else (f".{part}" if label else str(part))
    return label


def _allowed(ctx: dict[str, Any]) -> list[str]:
    expected = str(ctx.get("expected", ""))
    return [p.strip().strip("'") for p in expected.replace(" or ", ", ").split(",") if p.strip()]


def _one(sink: Sink, line: int, err: ErrorDetails) -> None:
    loc = tuple(err["loc"])
    kind = err["type"]
    value = err.get("input")
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    top = str(loc[0]) if loc else ""
    leaf = str(loc[-1]) if loc and isinstance(loc[-1], str) else top
    in_turn = top == "history" and len(loc) == 3
    label = field_label(loc)
    if isinstance(ctx.get("index"), int):  # a list validator names the item it refused
        label += f"[{ctx['index']}]"
    what = sink.hint(leaf if in_turn else top)
    if kind == "missing":
        sink.add(line, label, "missing-field", code="missing-field", hint=what)
    elif kind == "extra_forbidden":
        known = list(_TURN_FIELDS if in_turn else CASE_FIELDS)
        close = difflib.get_close_matches(leaf, known, n=1, cutoff=0.6)
        fix = (
            sink.say("unknown-field.close", close=close[0])
            if close
            else sink.say("unknown-field.remove", known=", ".join(known))
        )
        sink.add(line, label, "unknown-field", code="unknown-field", fix=fix, name=leaf)
    elif kind == "null_not_allowed":
        sink.add(line, label, "null", code="wrong-type")
    elif kind in _TYPE_OF_ERROR:
        expected = sink.say(f"type.{_TYPE_OF_ERROR[kind]}")
        sink.add(
            line,
            label,
            "wrong-type",
            code="wrong-type",
            fix=sink.say("wrong-type.fix", hint=what or expected),
            actual=type_name(value, sink.lang),
            value=show(value),
            expected=expected,
        )
    elif kind == "literal_error":
        allowed = _allowed(ctx)
        close = (
            difflib.get_close_matches(value, allowed, n=1, cutoff=0.6)
            if isinstance(value, str)
            else []
        )
        fix = (
            sink.say("not-one-of.close", close=close[0])
            if close
            else sink.say("not-one-of.fix", hint=what or ", ".join(allowed))
        )
        sink.add(
            line,
            label,
            "not-one-of",
            code="bad-value",
            fix=fix,
            value=show(value),
            allowed=", ".join(allowed),
        )
    elif kind == "string_unicode":
        return  # a lone surrogate: reported, with its field, by app.limits.case_problems
    elif kind == "string_pattern_mismatch":
        key = _PATTERN_MESSAGE.get(top, "empty-text")
        fix = None
        if key == "empty-text":  # a required text has no "leave it out"
            fix = sink.say("empty-text.required.fix" if top in _REQUIRED else "empty-text.fix")
        sink.add(line, label, key, code="bad-value", value=show(value), fix=fix)
    elif kind == "too_short":
        sink.add(line, label, "empty-list", code="bad-value", hint=what)
    elif kind == "string_too_long":
        sink.add(line, label, "too-long", code="bad-value", n=ctx.get("max_length"))
    elif kind == "greater_than_equal":
        sink.add(line, label, "too-small", code="bad-value", value=show(value), hint=what)
    else:
        sink.add(
            line, label or "line", "schema-other", code="schema", msg=err["msg"][:120], hint=what
        )


def check_fields(sink: Sink, line: int, obj: dict[str, Any]) -> Case | None:
    """Validate ``obj`` with :class:`Case` and report every error; the case when it is valid."""
    try:
        return Case.model_validate(obj)
    except ValidationError as exc:
        for err in exc.errors():
            _one(sink, line, err)
        return None
