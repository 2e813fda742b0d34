"""Bytes to lines to JSON objects, for ``rag datasets check``.

The layer under the field and meaning checks: a UTF-8 BOM, CRLF line ends and blank lines
are tolerated with a warning (as :func:`app.eval.datasets.case.iter_lines` tolerates them); a
byte that is not UTF-8, a JSON syntax error (with the column, and full-width punctuation,
smart quotes and a stray BOM named precisely), a duplicate key or a line that is not an
object is an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

from app.eval.datasets.issues import Sink, type_name
from app.eval.datasets.messages import PUNCTUATION
from app.limits import limit

__all__ = ["RawLine", "parse_line", "raw_lines_of", "read_lines", "split_lines", "stream_lines"]

_JSON_KEYS = (
    "Expecting property name",
    "Expecting ',' delimiter",
    "Expecting ':' delimiter",
    "Unterminated string",
    "Invalid control character",
    "Invalid \\escape",
    "Extra data",
    "Expecting value",
)


#: a line longer than this many times ``dataset_line_bytes`` is not a dataset line (binary
#: data, a file of zeros): the check stops reading there with an input error (exit 2)
HOSTILE_LINES = 16

#: a line of a file: its byte offset, its bytes without the ``\n`` (None: over
#: ``dataset_line_bytes``, not read into memory) and its length in bytes
RawLine = tuple[int, bytes | None, int]


def raw_lines_of(data: bytes) -> Iterator[RawLine]:
    """The lines of ``data`` held in memory (the editor's text), as :func:`stream_lines`
    gives those of a file."""
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the newline that ends the last line
    offset = 0
    for raw in raw_lines:
        yield offset, raw, len(raw)
        offset += len(raw) + 1


def stream_lines(stream: IO[bytes], hasher: Any = None) -> Iterator[RawLine]:
    """The lines of a file read one at a time (``hasher.update`` sees every byte): memory
    holds one line, and a line over ``dataset_line_bytes`` is skipped unread (its length
    is counted) — a hostile file cannot make the reader hold more than one line. A line
    over :data:`HOSTILE_LINES` times the limit ends the reading (size ``-1``)."""
    cap = limit("dataset_line_bytes") + 5  # a BOM, a CR and the newline do not count
    offset = 0
    while True:
        raw = stream.readline(cap)
        if not raw:
            return
        if hasher is not None:
            hasher.update(raw)
        size = len(raw)
        if raw.endswith(b"\n"):
            yield offset, raw[:-1], size - 1
            offset += size
            continue
        if size < cap:  # the last line, without a newline
            yield offset, raw, size
            return
        ended = False
        while not ended:  # over the limit: count the rest of the line, hold none of it
            if size > HOSTILE_LINES * cap:  # no dataset line: the reading stops here
                yield offset, None, -1
                return
            more = stream.readline(1 << 20)
            if not more:
                break
            if hasher is not None:
                hasher.update(more)
            ended = more.endswith(b"\n")
            size += len(more)
        yield offset, None, size - 1 if ended else size
        offset += size


def split_lines(data: bytes, sink: Sink) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` for each non-blank line of ``data`` that is UTF-8
    text (:func:`read_lines`)."""
    for number, _, text in read_lines(raw_lines_of(data), sink):
        yield number, text


def read_lines(lines: Iterable[RawLine], sink: Sink) -> Iterator[tuple[int, int, str]]:
    """Yield ``(line number, byte offset, text)`` for each non-blank line that is UTF-8 text.

    Reports a BOM, CRLF, blank lines (warnings), an empty file (warning), bytes that are
    not UTF-8 (error; the result is marked fatal) and a line over ``dataset_line_bytes``.
    """
    crlf_reported = False
    blank: list[int] = []
    blanks = 0
    number = 0
    cap = limit("dataset_line_bytes")
    for number, (offset, raw, size) in enumerate(lines, start=1):
        if raw is None and size < 0:  # far over the limit: not a dataset file
            sink.add_text(
                number,
                "",
                f"more than {HOSTILE_LINES * cap:,} bytes without a line end: not a line of "
                "a dataset (the file is binary or not JSONL)",
                "check that this is the dataset file (limits: docs/limits.md)",
                code="unreadable",
            )
            sink.result.fatal = True
            return
        if raw is None:  # over the limit, not read
            sink.add(number, "", "line-too-long", code="line-too-long", size=size, cap=cap)
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
            sink.add(1, "", "bom", code="bom", severity="warning")
        if raw.endswith(b"\r"):
            raw = raw[:-1]
            if not crlf_reported:
                crlf_reported = True
                sink.add(number, "", "crlf", code="crlf", severity="warning")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            sink.add(number, "", "not-utf8", code="unreadable", col=exc.start + 1)
            sink.result.fatal = True
            continue
        if not text.strip():
            blanks += 1
            if len(blank) <= 10:  # the first ones are named; a file of blank lines holds none
                blank.append(number)
            continue
        if len(raw) > cap:
            sink.add(number, "", "line-too-long", code="line-too-long", size=len(raw), cap=cap)
            continue
        yield number, offset, text
    if number == 0:
        sink.add(None, "", "empty-file", code="empty-file", severity="warning")
        return
    if blank:
        where = ", ".join(str(n) for n in blank[:10]) + (" …" if blanks > 10 else "")
        sink.add(blank[0], "", "blank-line", code="blank-line", severity="warning", where=where)


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


def _suspect(text: str, pos: int) -> int | None:
    """The position of look-alike punctuation at or just around a JSON error, if any."""
    candidates = [pos, pos - 1]
    after = pos
    while after < len(text) and text[after] in " \t":
        after += 1
    candidates.append(after)
    for p in candidates:
        if 0 <= p < len(text) and text[p] in PUNCTUATION:
            return p
    return None


def _punctuation(sink: Sink, line: int, text: str, pos: int) -> bool:
    """Report look-alike punctuation near ``pos``; False when there is none."""
    at = _suspect(text, pos)
    if at is None:
        return False
    char = text[at]
    en_name, zh_name, ascii_char = PUNCTUATION[char]
    name = zh_name if sink.lang == "zh" else en_name
    if not ascii_char:
        sink.add(
            line,
            "",
            "json.invisible",
            code="json",
            fix=sink.say("json.punct.invisible.fix"),
            line=line,
            col=at + 1,
            name=name,
        )
        return True
    kind = {",": "逗号", ":": "冒号", '"': "双引号", " ": "空格"}.get(ascii_char, "括号")
    need = sink.say("json.punct.need", ascii=ascii_char, kind=kind)
    fix = sink.say("json.punct.fix")
    shown = char if char != "\u3000" else "U+3000"
    sink.add(
        line,
        "",
        "json.punct",
        code="json",
        fix=fix,
        line=line,
        col=at + 1,
        name=name,
        char=shown,
        need=need,
    )
    return True


def parse_line(sink: Sink, line: int, text: str) -> dict[str, Any] | None:
    """The JSON object on one non-blank line, or ``None`` after reporting why not."""
    try:
        obj = json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        if _punctuation(sink, line, text, exc.pos):
            return None
        key = next((k for k in _JSON_KEYS if exc.msg.startswith(k)), None)
        fix = sink.say(key) if key else sink.say("json.generic.fix")
        sink.add(line, "", "json", code="json", fix=fix, msg=exc.msg, col=exc.colno, line=line)
        return None
    except (ValueError, RecursionError) as exc:
        sink.add(line, "", "json.other", code="json", msg=str(exc)[:80])
        return None
    if not isinstance(obj, dict):
        sink.add(line, "", "not-object", code="json", what=type_name(obj, sink.lang))
        return None
    for key in getattr(obj, "duplicates", []):
        sink.add(line, key, "duplicate-field", code="duplicate-field")
    return obj
