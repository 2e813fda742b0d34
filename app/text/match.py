"""Keyword matching: one semantics for metrics, dataset checks and the suite builder.

:func:`mentions` is the plain form (markers, trigger keywords, a search box): NFKC +
case-folded substring search, nothing more.

:func:`contains` is how a keyword (``must_include``, ``must_not_include``, a canary) is
looked for in a text: both are :func:`app.text.normalise.normalise`-d (NFKC, casefold,
whitespace collapsed), thousands separators are dropped from numbers (``32,000`` and
``32000`` are the same number), a keyword that starts or ends with a digit must match a
whole number there (``32000`` is not in ``132000``, ``600`` not in ``600.5``), and
whitespace differences are ignored as a second try (CJK text is written with or without
spaces).

:class:`Matcher` is how an analyser *term* is found in one text (the offline baselines'
sentences and answers): a CJK term is a substring of the text (a segmentation difference
must not hide 年假 inside 带薪年假); any other term must equal a whole token of it.
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Iterable

from app.text.analyser import has_cjk, tokenize
from app.text.normalise import fold, nfkc, normalise

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_CITATION = re.compile(r"\[\d+\]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def strip_citations(text: str) -> str:
    """Citation markers ``[n]`` replaced by a space (they are not content)."""
    return _CITATION.sub(" ", nfkc(text))


def numbers(text: str) -> list[str]:
    """The numbers in ``text`` in order, as :func:`contains` reads them: NFKC, thousands
    separators dropped, citation markers ignored (``32,000元[1]`` → ``['32000']``)."""
    return _NUMBER.findall(_THOUSANDS.sub("", strip_citations(text)))


def _found(needle: str, haystack: str) -> bool:
    """Substring search, except that a needle starting or ending in a digit must match a
    whole number there: ``32000`` is not found in ``132000`` nor ``600`` in ``600.5``."""
    if not needle:
        return True
    if not (needle[0].isdigit() or needle[-1].isdigit()):
        return needle in haystack  # what the escaped pattern would find
    pattern = re.escape(needle)
    if needle[0].isdigit():
        pattern = r"(?<![\d.])" + pattern
    if needle[-1].isdigit():
        pattern += r"(?!\.?\d)"
    return re.search(pattern, haystack) is not None


@functools.lru_cache(maxsize=1024)
def _prepared(text: str) -> tuple[str, str]:
    """``text`` as :func:`contains` compares it: normalised, thousands separators dropped;
    and that without spaces. Kept for recent texts: a case's answer and a dataset's golden
    chunks are searched for several keywords each."""
    norm = _THOUSANDS.sub("", normalise(text))
    return norm, norm.replace(" ", "")


def contains(haystack: str, needle: str) -> bool:
    """Is keyword ``needle`` in ``haystack``? (see the module docstring)."""
    h, h_flat = _prepared(haystack)
    n, n_flat = _prepared(needle)
    return _found(n, h) or _found(n_flat, h_flat)


def mentions(text: str, markers: Iterable[str]) -> bool:
    """Plain marker search: True when ``text`` contains one of ``markers``, both NFKC +
    case-folded (no whitespace or number rules: refusal markers, a prompt's rejection
    trigger keywords, a search box). An empty marker never matches."""
    low = fold(text)
    return any(m and fold(m) in low for m in markers)


def contains_any(texts: list[str] | tuple[str, ...], needle: str) -> bool:
    """:func:`contains` in at least one of ``texts``."""
    return any(contains(t, needle) for t in texts)


class Matcher:
    """Finds analyser terms in one text: CJK terms as substrings, other terms as whole
    tokens. Citation markers ``[n]`` are not part of the text."""

    def __init__(self, text: str) -> None:
        plain = strip_citations(text)
        self.text = fold(plain)
        self.tokens: tuple[str, ...] = tuple(tokenize(plain, query=False))
        #: how often each token occurs (read-only; a term is in it iff it is a token)
        self.counts = collections.Counter(self.tokens)

    def count(self, term: str) -> int:
        if has_cjk(term):
            return self.text.count(term)
        return self.counts[term]

    def __contains__(self, term: str) -> bool:
        """``count(term) > 0``: a token of the text (a CJK token is a substring of the
        folded text too), else a CJK term anywhere in the text (``in`` stops at the first
        occurrence where ``count`` reads the whole text)."""
        return term in self.counts or (has_cjk(term) and term in self.text)
