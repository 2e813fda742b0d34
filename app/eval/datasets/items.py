"""List fields typed by people: one parser for the editor's text boxes and spreadsheet cells.

An expert writes a list (``must_include``, ``tags``, ``acl``, chunk ids …) the way the
moment suggests — one item per line, ``24 小时，8000``, ``身份证、体检报告``, ``a; b`` or the
JSON the old help showed (``["身份证", "体检报告"]``, also with full-width punctuation). All of
these mean the same list; :func:`parse_items` returns it, and the editor shows the parsed
items before anything is saved.

The rules, in order:

* a text that is a JSON array is exactly that array (items that are numbers become texts);
* otherwise a text wrapped in ``[ ]`` / ``［ ］`` / ``【 】`` loses the brackets (a JSON list typed
  with Chinese punctuation);
* items are separated by line breaks, ``;`` ``；`` ``，`` ``、`` and ``,`` — a ``,`` between two
  digits (``8,000``) is part of a number, not a separator;
* each item is trimmed and loses one pair of surrounding quotes (``"…"`` ``“…”`` ``'…'``
  ``「…」`` ``『…』``); empty items are dropped.

An item that must hold a separator is written as a JSON array (``["a, b"]``).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["LIST_FIELDS", "looks_joined", "parse_items", "parse_lists"]

#: the case fields that are lists of texts (``history`` is a list of turns, not here)
LIST_FIELDS: tuple[str, ...] = (
    "golden_chunk_ids",
    "acceptable_chunk_ids",
    "must_include",
    "must_not_include",
    "acl",
    "tags",
)

_SEPARATOR = re.compile(r"[\n\r;；，、]|(?<!\d),|,(?!\d)")
_BRACKETS = (("[", "]"), ("［", "］"), ("【", "】"))
_QUOTES = (('"', '"'), ("“", "”"), ("'", "'"), ("‘", "’"), ("「", "」"), ("『", "』"))
# an item that still looks like several (full-width separators) or like JSON text
_JOINED = re.compile(r"[，、；;\n]|^\s*[\[［【].*[\]］】]\s*$", re.S)


def _unquote(item: str) -> str:
    item = item.strip()
    for left, right in _QUOTES:
        if len(item) >= 2 and item.startswith(left) and item.endswith(right):
            return item[1:-1].strip()
    return item


def parse_items(text: str) -> list[str]:
    """The list an expert meant by ``text`` (see the module docstring for the rules)."""
    stripped = text.strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            return [v if isinstance(v, str) else json.dumps(v) for v in value]  # exact, as JSON
    for left, right in _BRACKETS:
        if stripped.startswith(left) and stripped.endswith(right):
            stripped = stripped[len(left) : -len(right)]
            break
    items = (_unquote(part) for part in _SEPARATOR.split(stripped))
    return [item for item in items if item]


def parse_lists(case: dict[str, Any]) -> dict[str, list[str]]:
    """Parse, in place, every list field of ``case`` that holds a text (an editor text box);
    return the parsed fields (field -> items) so the caller can show them."""
    parsed: dict[str, list[str]] = {}
    for name in LIST_FIELDS:
        value = case.get(name)
        if isinstance(value, str):
            case[name] = parsed[name] = parse_items(value)
    return parsed


def looks_joined(item: str) -> bool:
    """True when one list item looks like several typed together (``24 小时，8000``) or like a
    JSON list pasted into one item."""
    return bool(_JOINED.search(item))
