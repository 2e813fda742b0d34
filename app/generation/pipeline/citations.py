"""After the model: rejection-keyword substitution and citation validation (seeds 000, 004).

* :func:`apply_rejection` — if the answer contains any of the prompt's
  ``REJECTION_TRIGGER_KEYWORDS``, the whole answer becomes its ``REJECTION_ANSWER``
  (ColossalQA ``base.py``): a deterministic guard against a refusal worded slightly off.
  A keyword is looked for as every refusal marker is (:func:`app.text.mentions`: NFKC and
  case-folded), so the guard and the refusal metric agree on full-width text. Answers
  saying "无法确定" / "cannot be determined" (:func:`app.text.is_uncertain`, seed 004
  §5.3) skip citation checks and go to the bad-case log.
* :func:`extract_citations` — ``[n]`` markers (also ``[1,2]``, ``[1][3]``, ``[1-2]``,
  full-width ``［1］``); a number outside ``1..len(documents)`` is invalid.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.text import mentions, nfkc

_MARKER = re.compile(r"\[(\d+(?:\s*[,，、\-–]\s*\d+)*)\]")


@dataclass(frozen=True)
class CitationCheck:
    numbers: tuple[int, ...]  # every [n] in order of first appearance
    valid: tuple[int, ...]
    invalid: tuple[int, ...]


def apply_rejection(
    text: str, trigger_keywords: Sequence[str], rejection_answer: str | None
) -> tuple[str, bool]:
    """``(answer, substituted)``: the rejection answer when a trigger keyword occurs."""
    if rejection_answer is None:
        return text, False
    if mentions(text, trigger_keywords):
        return rejection_answer, text != rejection_answer
    return text, False


_LIST_SEP = re.compile(r"\s*[,，、]\s*")
_RANGE = re.compile(r"\d+\s*[\-–]\s*\d+")
_RANGE_SEP = re.compile(r"\s*[\-–]\s*")


def _numbers(group: str) -> list[int]:
    out: list[int] = []
    for part in _LIST_SEP.split(group):
        if _RANGE.fullmatch(part):
            lo, hi = (int(x) for x in _RANGE_SEP.split(part))
            out.extend(range(lo, hi + 1) if 0 < hi - lo < 20 else (lo, hi))
        elif part.strip().isdigit():
            out.append(int(part))
    return out


def extract_citations(text: str, n_documents: int) -> CitationCheck:
    """All ``[n]`` markers in ``text`` split into valid (1..n_documents) and invalid."""
    seen: list[int] = []
    for match in _MARKER.finditer(nfkc(text)):
        for n in _numbers(match.group(1)):
            if n not in seen:
                seen.append(n)
    valid = tuple(n for n in seen if 1 <= n <= n_documents)
    invalid = tuple(n for n in seen if not 1 <= n <= n_documents)
    return CitationCheck(tuple(seen), valid, invalid)
