"""Prompt-injection detection that generalises: normalise first, then score signals together.

::

    text ─▶ views ─▶ signals (data: injection_signals.toml) ─▶ score ─▶ flagged?

**Views** (all linear in the text): ``plain`` — :mod:`app.text.normalise` first (NFKC:
full-width → ASCII; zero-width, bidi-control, variation-selector characters removed), then
combining marks removed, case-folded, Cyrillic/Greek homoglyphs mapped to Latin, whitespace collapsed;
``joined`` — plain with spacing tricks undone (``i g n o r e`` / ``i.g.n.o.r.e`` → ``ignore``,
``忽 略`` / ``忽-略`` → ``忽略``); ``leet`` — joined with ``0→o 1→i 3→e 4→a 5→s 7→t @→a $→s``
(only when a digit touches a letter); ``decoded`` — base64 runs of ≥ 16 characters that decode
to text, rot13 of the Latin letters, and %-/``\\u``-escapes, each normalised like ``joined``.

**Signals** are the ``[[signal]]`` entries of ``injection_signals.toml`` — one regex, one
family (override, role, extraction, delimiter, payload, authority, unlock, address) and one
weight each. A signal counts once if it matches in any view. The score is the sum over
families of ``min(family_cap, Σ weights)``; the text is flagged at ``score >= threshold``.
So one unambiguous cue (``ignore your instructions``, ``</用户提问>``) flags alone, while weak
cues (``developer mode``, ``system:`` at a line start, ``I'm the admin``) flag only together,
and a benign reading (``ignore my previous question``) carries a negative weight.

Every pattern is linear (bounded gaps, no nested quantifiers) and the views are built
once, so :func:`scan` is O(len(text) × number of signals). Most texts are benign, so a
signal's regex runs only on a view that holds one of the plain strings every match of it
contains (:func:`required_literals`, read from the pattern; all of them found in one pass
over the view): the same result as searching every signal in every view, tested.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import re
import tomllib
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.text.analyser import CJK_CLASS
from app.text.normalise import nfkc, strip_invisible

__all__ = ["SIGNALS_PATH", "Finding", "Signal", "SignalSet", "load_signals", "scan", "views"]

SIGNALS_PATH = Path(__file__).with_name("injection_signals.toml")

_SPACES = re.compile(r"\s+")
# Cyrillic / Greek letters that look like Latin ones (after casefold)
_HOMOGLYPHS = str.maketrans(
    "аеорсухіјѕԁһӏкмнтвԛԝυνοαεικτρχσ",
    "aeopcyxijsdhlkmhtbqwuvoaeiktpxo",
)
_LEET = str.maketrans("013457@$!|", "oieastasii")
_LEET_NEEDED = re.compile(r"[a-z][0-9@$]|[0-9@$][a-z]")
_SPACED_LETTERS = re.compile(r"\b[a-z](?:(?: |[._\-*·/|+~]{1,3})[a-z]\b){2,}")
_SEPARATORS = re.compile(r"[ ._\-*·/|+~]")
_CJK_GAP = re.compile(rf"(?<=[{CJK_CLASS}])[\s._\-*·/|+~_]{{1,3}}(?=[{CJK_CLASS}])")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_ESCAPES = re.compile(r"(?:%[0-9a-fA-F]{2}){3,}|(?:\\u[0-9a-fA-F]{4}){3,}")
_MACRO = re.compile(r"\{([a-z_]+)\}")
_ASCII_LETTERS = re.compile("[A-Za-z]")


def _folded(text: str) -> str:
    """NFKC, invisible characters and combining marks removed, case-folded, homoglyphs."""
    text = strip_invisible(nfkc(text))  # the one normaliser (app.text)
    if any(unicodedata.combining(c) for c in text):
        text = "".join(c for c in text if not unicodedata.combining(c))
    return text.casefold().translate(_HOMOGLYPHS)


def _plain(text: str) -> str:
    return _SPACES.sub(" ", _folded(text)).strip()


def _joined(folded: str) -> str:
    """Spacing tricks undone *before* whitespace is collapsed: ``i g n o r e   t h e``
    keeps its wider word gap, so it becomes ``ignore the``, not ``ignorethe``."""
    text = _SPACED_LETTERS.sub(lambda m: _SEPARATORS.sub("", m.group(0)), folded)
    return _SPACES.sub(" ", _CJK_GAP.sub("", text)).strip()


def _decoded(text: str) -> list[str]:
    """Texts hidden in simple encodings (base64, rot13, %-/\\u-escapes), if any."""
    out: list[str] = []
    for run in _BASE64.findall(text)[:20]:
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if decoded.isprintable():
            out.append(decoded)
    if len(_ASCII_LETTERS.findall(text)) >= 12:  # the ASCII letters: c.isascii() and c.isalpha()
        out.append(codecs.encode(text, "rot13"))
    for run in _ESCAPES.findall(text)[:20]:
        if run.startswith("%"):
            out.append(urllib.parse.unquote(run))
        else:
            out.append(codecs.decode(run, "unicode_escape"))
    return out


def views(text: str) -> dict[str, str]:
    """The normalised views a text is scanned in (see the module docstring)."""
    folded = _folded(text)
    plain = _SPACES.sub(" ", folded).strip()
    joined = _joined(folded)
    out = {"plain": plain, "joined": joined}
    if _LEET_NEEDED.search(joined):
        out["leet"] = joined.translate(_LEET)
    for i, hidden in enumerate(_decoded(nfkc(text))):
        out[f"decoded{i}"] = _joined(_folded(hidden))
    return out


@dataclass(frozen=True)
class Signal:
    family: str
    name: str
    weight: float
    regex: re.Pattern[str]
    #: strings one of which every match of ``regex`` contains (:func:`required_literals`);
    #: a view holding none of them cannot match, so it is not searched. None: no such set
    needs: frozenset[str] | None = None


_MAX_NEEDS = 64  # a longer list of strings costs more to test than it saves


def required_literals(pattern: str) -> frozenset[str] | None:
    """A set of strings such that every match of ``pattern`` (compiled without flags, as
    the signals are) contains at least one of them, or None when none is found.

    Read from the pattern's parse tree (:mod:`re`'s own parser): a run of literal
    characters must appear as it is (zero-width assertions such as ``\\b`` or lookarounds
    consume nothing, so the run goes on across them); an alternation needs one of its
    branches' sets; a group or a repeat of at least once needs its content's; anything else
    (classes, optional parts, case-insensitive flags) gives nothing. Of a sequence's
    candidates the one with the longest shortest string is kept. Any surprise in the tree
    gives None (the regex is then always run): a wrong answer here could only make the
    scan skip a real match, so it never guesses."""
    try:
        from re import _constants as c  # type: ignore[attr-defined]
        from re import _parser as parser  # type: ignore[attr-defined]

        tree = parser.parse(pattern)
        if tree.state.flags & (re.IGNORECASE | re.LOCALE):
            return None
        found = _sequence_needs(list(tree), c)
    except Exception:
        return None
    if found is None or not found or len(found) > _MAX_NEEDS or "" in found:
        return None
    return found


def _sequence_needs(items: list[tuple[Any, Any]], c: Any) -> frozenset[str] | None:
    candidates: list[frozenset[str]] = []
    run: list[str] = []
    zero_width = {c.AT, c.ASSERT, c.ASSERT_NOT}
    for op, av in items:
        if op is c.LITERAL:
            run.append(chr(av))
            continue
        if op in zero_width:
            continue
        if run:
            candidates.append(frozenset({"".join(run)}))
            run = []
        sub = _item_needs(op, av, c)
        if sub is not None:
            candidates.append(sub)
    if run:
        candidates.append(frozenset({"".join(run)}))
    if not candidates:
        return None
    return max(candidates, key=lambda s: (min(len(x) for x in s), -len(s)))


def _item_needs(op: Any, av: Any, c: Any) -> frozenset[str] | None:
    if op is c.BRANCH:
        union: set[str] = set()
        for alternative in av[1]:
            sub = _sequence_needs(list(alternative), c)
            if sub is None:
                return None
            union |= sub
        return frozenset(union)
    if op is c.SUBPATTERN:
        _group, add_flags, _del_flags, sub_tree = av
        if add_flags & (re.IGNORECASE | re.LOCALE):
            return None
        return _sequence_needs(list(sub_tree), c)
    if op is getattr(c, "ATOMIC_GROUP", None):
        return _sequence_needs(list(av), c)
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        low, _high, sub_tree = av
        return _sequence_needs(list(sub_tree), c) if low >= 1 else None
    if op is c.IN:
        members = list(av)
        if members and all(m_op is c.LITERAL for m_op, _v in members):
            return frozenset(chr(v) for _op, v in members)
        return None
    return None


@dataclass(frozen=True)
class SignalSet:
    threshold: float
    family_cap: float
    signals: tuple[Signal, ...]
    # every signal's needs in one alternation, longest first (searched again one character
    # after each occurrence: overlapping ones count); each string -> the needs it starts with
    _literals: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _prefixes: dict[str, frozenset[str]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # needed string -> the signals (by position) that need it; signals without needs
    _needed_by: dict[str, tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _always: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        strings = sorted(
            {x for s in self.signals for x in (s.needs or ())}, key=lambda x: (-len(x), x)
        )
        if strings:
            alternation = "|".join(re.escape(x) for x in strings)
            object.__setattr__(self, "_literals", re.compile(alternation))
            prefixes = {x: frozenset(y for y in strings if x.startswith(y)) for x in strings}
            object.__setattr__(self, "_prefixes", prefixes)
        needed_by = {
            x: tuple(i for i, s in enumerate(self.signals) if s.needs and x in s.needs)
            for x in strings
        }
        object.__setattr__(self, "_needed_by", needed_by)
        always = tuple(i for i, s in enumerate(self.signals) if s.needs is None)
        object.__setattr__(self, "_always", always)

    def candidates(self, present: Iterable[str]) -> list[int]:
        """The signals (by position, in file order) that may match a text whose views hold
        the needed strings ``present``: those without needs and those needing one of them."""
        out = set(self._always)
        for x in present:
            out.update(self._needed_by[x])
        return sorted(out)

    def present(self, view: str) -> set[str]:
        """The signals' needed strings that occur in ``view``. At each position the
        alternation takes the longest one starting there; every shorter one starting there
        is a prefix of it, so all of them are found."""
        found: set[str] = set()
        if self._literals is not None:
            search, prefixes, pos = self._literals.search, self._prefixes, 0
            while (m := search(view, pos)) is not None:  # every start, overlaps included
                found.update(prefixes[m.group()])
                pos = m.start() + 1
        return found


@dataclass(frozen=True)
class Finding:
    """What :func:`scan` found: flagged or not, the score, and which signals matched."""

    detected: bool
    score: float = 0.0
    families: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()  # "family/name"
    spans: tuple[str, ...] = field(default=(), repr=False)  # matched text (normalised view)

    @property
    def patterns(self) -> tuple[str, ...]:
        """The matching signals with a positive weight (the trace's ``patterns``)."""
        return self.signals


class SignalFileError(ValueError):
    """The signal file is malformed (a programming error in shipped data; tested)."""


def load_signals(path: Path = SIGNALS_PATH) -> SignalSet:
    """Read and compile the signal file; every problem names the signal."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    macros: dict[str, str] = {str(k): str(v) for k, v in data.get("macros", {}).items()}

    def expand(pattern: str, name: str) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) not in macros:
                raise SignalFileError(f"{path}: signal {name}: unknown macro {{{m.group(1)}}}")
            return macros[m.group(1)]

        return _MACRO.sub(sub, pattern)

    signals: list[Signal] = []
    for entry in data.get("signal", []):
        name = str(entry.get("name", "?"))
        try:
            regex = re.compile(expand(str(entry["pattern"]), name))
            signals.append(
                Signal(
                    str(entry["family"]),
                    name,
                    float(entry["weight"]),
                    regex,
                    required_literals(regex.pattern),
                )
            )
        except (KeyError, re.error, TypeError) as exc:
            raise SignalFileError(f"{path}: signal {name}: {exc}") from None
    return SignalSet(float(data["threshold"]), float(data["family_cap"]), tuple(signals))


@functools.cache
def _default() -> SignalSet:
    return load_signals()


def scan(text: str, signal_set: SignalSet | None = None) -> Finding:
    """Score ``text`` against the signals on all its views (linear in ``len(text)``)."""
    ss = signal_set or _default()
    vs = list(dict.fromkeys(views(text).values()))
    present = [ss.present(view) for view in vs]
    hit: dict[str, tuple[Signal, str]] = {}
    for index in ss.candidates(set().union(*present)):  # the others cannot match
        sig = ss.signals[index]
        for view, there in zip(vs, present, strict=True):
            # a view holding none of the strings every match contains cannot match
            if sig.needs is not None and sig.needs.isdisjoint(there):
                continue
            m = sig.regex.search(view)
            if m:
                hit[f"{sig.family}/{sig.name}"] = (sig, m.group(0))
                break
    per_family: dict[str, float] = {}
    for sig, _ in hit.values():
        per_family[sig.family] = per_family.get(sig.family, 0.0) + sig.weight
    score = sum(max(0.0, min(ss.family_cap, w)) for w in per_family.values())
    positive = [k for k, (s, _) in hit.items() if s.weight > 0]
    return Finding(
        detected=score >= ss.threshold - 1e-9,
        score=round(score, 3),
        families=tuple(f for f, w in per_family.items() if w > 0),
        signals=tuple(positive),
        spans=tuple(hit[k][1] for k in positive),
    )
