"""The one text normaliser: every comparison of user, document and model text starts here.

* :func:`nfkc` — Unicode NFKC: full-width letters, digits and punctuation become ASCII
  (ＶＰＮ → VPN, １２ → 12, ［1］ → [1]), compatibility ligatures are expanded.
* :func:`fold` — :func:`nfkc` then ``str.casefold`` (the analyser's and matcher's form).
* :func:`strip_invisible` — zero-width and bidi-control characters removed (U+200B…,
  soft hyphen, BOM): they change nothing a reader sees, so an attacker's ``ig\u200bnore``
  must compare equal to ``ignore``.
* :func:`normalise` — :func:`fold` with whitespace runs collapsed to one space and the
  ends stripped (the metrics' keyword form).
* :func:`canonical` — :func:`normalise` with invisible characters removed first (the
  injection detector's view 1).
* :func:`compact` — :func:`nfkc` with whitespace collapsed, case kept (shadow replay's
  "is the answer text the same").
* :func:`alnum_key` — :func:`fold` keeping letters and digits only (a question's identity
  when mining the answer log and matching it against the suites).

Every module that compares text calls one of these; none keeps its own ``lower()`` or
NFKC (the injection detector adds its homoglyph and combining-mark folding on top of
:func:`nfkc` and :func:`strip_invisible`, in ``app/generation/pipeline/injection.py``).

All functions are pure and total (any ``str`` in, a ``str`` out).
"""

from __future__ import annotations

import functools
import re
import unicodedata

# soft hyphen, Mongolian vowel separator, zero-width and bidi controls, word joiner and
# invisible operators, bidi isolates, Hangul fillers, variation selectors, BOM
INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)


@functools.lru_cache(maxsize=512)
def nfkc(text: str) -> str:
    """Unicode NFKC (full-width → half-width).

    Kept for the last 512 texts: one case's texts (its answer, context, golden answer) are
    normalised again and again (the analyser, the matchers, the citation and keyword
    checks, each judge rule: ≈ 19 calls on ≈ 7 texts per case), and a Chinese text with
    full-width punctuation is not NFKC already, so each call decomposes and recomposes it."""
    return unicodedata.normalize("NFKC", text)


def fold(text: str) -> str:
    """NFKC, then case-folded."""
    return nfkc(text).casefold()


def strip_invisible(text: str) -> str:
    """Zero-width, soft-hyphen, BOM and bidi-control characters removed."""
    return INVISIBLE.sub("", text)


def collapse_spaces(text: str) -> str:
    """Whitespace runs become one space; the ends are stripped (``str.split`` splits on the
    characters ``\\s`` matches: the same result as substituting ``\\s+``, tested)."""
    return " ".join(text.split())


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed (what keyword matching compares)."""
    return collapse_spaces(fold(text))


def canonical(text: str) -> str:
    """:func:`normalise` with invisible characters removed before folding."""
    return collapse_spaces(strip_invisible(nfkc(text)).casefold())


def compact(text: str) -> str:
    """NFKC, whitespace collapsed, case kept."""
    return collapse_spaces(nfkc(text))


def alnum_key(text: str) -> str:
    """:func:`fold` with everything but letters and digits dropped."""
    return "".join(ch for ch in fold(text) if ch.isalnum())
