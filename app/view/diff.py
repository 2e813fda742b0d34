"""A word-level diff of two answers that is Chinese-aware.

Latin text is split into words, numbers, spaces and punctuation; a run of CJK characters
is cut into words by jieba (:func:`app.text.ensure_jieba`, the same dictionary the
analyser uses), so 年假为十天 → 年假为十天 becomes 年假 / 为 / 十天 and a change of one
word is shown as that word, not as the whole sentence. Every character of both texts is
kept: joining a side's segments gives the text back exactly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from app.text import ensure_jieba, has_cjk
from app.text.analyser import CJK_CLASS as _CJK

__all__ = ["Segment", "segments", "word_diff"]

# CJK runs; latin words (letters, digits, in-word . , - ' e.g. 3.5 or e-mail); spaces; any
# other single character (punctuation, full-width marks, emoji).
_PIECE = re.compile(f"([{_CJK}]+)|([^\\W_]+(?:[.,'\\-][^\\W_]+)*)|(\\s+)|(.)", re.DOTALL)

Op = Literal["equal", "delete", "insert"]


@dataclass(frozen=True)
class Segment:
    op: Op  # equal | delete (only in the base) | insert (only in the new answer)
    text: str


def segments(text: str) -> list[str]:
    """The words of ``text`` in order, every character kept (``"".join`` gives it back)."""
    out: list[str] = []
    for match in _PIECE.finditer(text):
        cjk = match.group(1)
        if cjk is not None:
            out.extend(ensure_jieba().cut(cjk, HMM=False) if has_cjk(cjk) else [cjk])
        else:
            out.append(match.group(0))
    return out


def word_diff(base: str, new: str) -> tuple[list[Segment], list[Segment]]:
    """``(base side, new side)``: each side's words marked equal, deleted or inserted."""
    a, b = segments(base), segments(new)
    left: list[Segment] = []
    right: list[Segment] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            left.append(Segment("equal", "".join(a[i1:i2])))
            right.append(Segment("equal", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(Segment("insert", "".join(b[j1:j2])))
    return left, right
