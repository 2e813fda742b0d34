"""The sentence splitter used by the offline baselines and the judge rules."""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"[^。！？!?\n]+(?:[。！？!?]+|\n|$)|(?<=[。！？!?])\s*")
_EN_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def sentences(text: str) -> list[str]:
    """Split into sentences at 。！？!? (kept attached), newlines and ". " before a capital;
    semicolons do not split (a clause after ； usually belongs to the same rule). Pieces with
    no letter or digit are dropped."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        for piece in _SENTENCE.findall(line):
            for part in _EN_SPLIT.split(piece):
                part = part.strip()
                if part and any(ch.isalnum() for ch in part):
                    out.append(part)
    return out
