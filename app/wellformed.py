"""Text that cannot be encoded: the one rule for it.

A Python ``str`` may hold a lone surrogate (a code point U+D800–U+DFFF): a JSON escape
``"\\ud800"`` in a model's reply decodes to one (real models emit broken surrogate pairs),
and so does a command-line argument that was not valid UTF-8 (``surrogateescape``). No UTF-8
writer accepts it: SQLite, ``open(..., encoding="utf-8")``, pydantic's and msgspec's JSON
encoders all raise ``UnicodeEncodeError``.

The rule, applied where such text enters (the provider boundary, :mod:`app.llm.engine`) and
at every writer that could still meet it (response cache, checkpoint, report, HTML, logs,
answer log): each lone surrogate is replaced by U+FFFD (``�``), counted, and the count is
recorded where the text came from — never dropped silently, never a traceback. Input that a
user types (a question, a dataset field) is refused instead, with the character's position
(:func:`first_invalid`, used by :mod:`app.limits`).

::

    scrub(text) -> (clean text, replaced)     first_invalid(text) -> index | None
    clean(text) -> clean text                 clean_data(value) -> (value, replaced)
    model_json(pydantic model) -> JSON text   (model_dump_json(), cleaned only if it must be)
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["REPLACEMENT", "clean", "clean_data", "first_invalid", "model_json", "scrub"]

log = logging.getLogger(__name__)

REPLACEMENT = "\ufffd"
_INVALID = re.compile("[\ud800-\udfff]")


def first_invalid(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (not encodable as UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def scrub(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many were replaced.
    Text that encodes (the usual case) is returned as is, after one encode attempt."""
    if text.isascii():
        return text, 0
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _INVALID.subn(REPLACEMENT, text)
    return text, 0


def clean(text: str) -> str:
    """:func:`scrub`'s text (for a writer that records the count some other way or not)."""
    return scrub(text)[0]


def clean_data(value: Any) -> tuple[Any, int]:
    """A JSON-like value (dicts, lists, tuples, strings; keys too) with every string
    :func:`scrub`-bed, and the number of characters replaced. Values that need no change are
    returned as they are (the same objects)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        total = 0
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if isinstance(k, str):
                k, n = scrub(k)
                total += n
            v, n = clean_data(v)
            total += n
            out[k] = v
        return (out, total) if total else (value, 0)
    if isinstance(value, list | tuple):
        items = []
        total = 0
        for item in value:
            item, n = clean_data(item)
            total += n
            items.append(item)
        if not total:
            return value, 0
        return (tuple(items) if isinstance(value, tuple) else items), total
    return value, 0


def model_json(model: Any) -> str:
    """``model.model_dump_json()`` of a pydantic model, the writers' form of the rule: a
    model holding text that is not valid Unicode (which pydantic refuses to encode) is
    written with that text replaced by U+FFFD, and a warning names the model and the count."""
    from pydantic_core import PydanticSerializationError

    try:
        text: str = model.model_dump_json()
    except PydanticSerializationError:
        data, replaced = clean_data(model.model_dump(mode="json"))
        if not replaced:
            raise
        log.warning(
            "%s: %d lone surrogate(s) (not valid Unicode) replaced by U+FFFD before writing",
            type(model).__name__,
            replaced,
        )
        text = type(model).model_validate(data).model_dump_json()
    return text
