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
contains (:func:`required_literals`, read from the pattern; a string is looked for only in
a view holding its rarest character): the same result as searching every signal in every
view, tested. The views take shortcuts that give the same text (an ASCII text needs no
Unicode folding, and its rot13 view is its joined view's rot13; a text with no spacing trick
has ``joined == plain``), tested against the views written out.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import hashlib
import re
import tomllib
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.text.analyser import CJK_CLASS
from app.text.normalise import collapse_spaces, nfkc, strip_invisible
from app.text.segcache import Kept

__all__ = ["SIGNALS_PATH", "Finding", "Signal", "SignalSet", "load_signals", "scan", "views"]

SIGNALS_PATH = Path(__file__).with_name("injection_signals.toml")

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
# (a match starts where a run of these characters starts: the look-behind skips the rest of
# a run at once, and finds the same matches)
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}")
_ESCAPES = re.compile(r"(?:%[0-9a-fA-F]{2}){3,}|(?:\\u[0-9a-fA-F]{4}){3,}")
_MACRO = re.compile(r"\{([a-z_]+)\}")
# at least 12 of the ASCII letters (c.isascii() and c.isalpha()), found from the start
_TWELVE_LETTERS = re.compile("(?:[^A-Za-z]*[A-Za-z]){12}")


_HOMOGLYPH_CHARS = re.compile("[" + "".join(map(chr, _HOMOGLYPHS)) + "]")
_ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
# characters seen whose combining class is 0 (a per-process constant of each character;
# bounded, so a text of many distinct characters cannot grow it without end)
_NOT_COMBINING: set[str] = set()
_NOT_COMBINING_MAX = 1 << 16


def _has_combining(text: str) -> bool:
    """``any(unicodedata.combining(c) for c in text)``, asking :mod:`unicodedata` once per
    distinct character (an ASCII text has none)."""
    if text.isascii() or _NOT_COMBINING.issuperset(text):
        return False
    for c in set(text).difference(_NOT_COMBINING):
        if unicodedata.combining(c):
            return True
        if len(_NOT_COMBINING) < _NOT_COMBINING_MAX:
            _NOT_COMBINING.add(c)
    return False


def _folded(text: str) -> str:
    """NFKC, invisible characters and combining marks removed, case-folded, homoglyphs."""
    return _folded_nfkc(nfkc(text))  # the one normaliser (app.text)


def _folded_nfkc(text: str) -> str:
    """:func:`_folded` of a text already in NFKC. An ASCII text has no invisible character,
    combining mark or homoglyph, and its case fold is ``lower()``."""
    if text.isascii():
        return text.lower()
    text = strip_invisible(text)
    if _has_combining(text):
        text = "".join(c for c in text if not unicodedata.combining(c))
    text = text.casefold()
    return text.translate(_HOMOGLYPHS) if _HOMOGLYPH_CHARS.search(text) else text


def _plain(text: str) -> str:
    return collapse_spaces(_folded(text))


def _joined(folded: str, plain: str | None = None) -> str:
    """Spacing tricks undone *before* whitespace is collapsed: ``i g n o r e   t h e``
    keeps its wider word gap, so it becomes ``ignore the``, not ``ignorethe``. ``plain``:
    ``folded`` with whitespace collapsed, when the caller has it (the result when there is
    no spacing trick to undo)."""
    text = _SPACED_LETTERS.sub(_unspaced, folded)
    if not text.isascii():  # a gap between CJK characters needs CJK characters
        text = _CJK_GAP.sub("", text)
    if plain is not None and text is folded:  # re's sub hands back its input unchanged
        return plain
    return collapse_spaces(text)


def _unspaced(m: re.Match[str]) -> str:
    return _SEPARATORS.sub("", m.group(0))


def _decoded(text: str) -> list[str]:
    """Texts hidden in simple encodings (base64, rot13, %-/\\u-escapes), if any."""
    return [hidden for hidden, _rot13 in _hidden(text)]


def _hidden(text: str) -> list[tuple[str, bool]]:
    """:func:`_decoded`'s texts, each with whether it is the rot13 of ``text``."""
    out: list[tuple[str, bool]] = []
    for run in _BASE64.findall(text)[:20] if len(text) >= 16 else ():
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if decoded.isprintable():
            out.append((decoded, False))
    if _TWELVE_LETTERS.match(text):  # 12 ASCII letters or more
        out.append((text.translate(_ROT13), True))  # codecs' rot13: the same table
    escapes = _ESCAPES.findall(text)[:20] if "%" in text or "\\u" in text else ()
    for run in escapes:
        if run.startswith("%"):
            out.append((urllib.parse.unquote(run), False))
        else:
            out.append((codecs.decode(run, "unicode_escape"), False))
    return out


def views(text: str) -> dict[str, str]:
    """The normalised views a text is scanned in (see the module docstring)."""
    normal = nfkc(text)
    folded = _folded_nfkc(normal)
    plain = collapse_spaces(folded)
    joined = _joined(folded, plain)
    out = {"plain": plain, "joined": joined}
    if _LEET_NEEDED.search(joined):
        out["leet"] = joined.translate(_LEET)
    ascii_text = normal.isascii()
    for i, (hidden, rot13) in enumerate(_hidden(normal)):
        # rot13 maps ASCII letters to letters of the same case and nothing else: on an ASCII
        # text it commutes with lower() and with undoing spacing tricks
        view = joined.translate(_ROT13) if rot13 and ascii_text else _joined(_folded(hidden))
        out[f"decoded{i}"] = view
    return out


@dataclass(frozen=True)
class Signal:
    family: str
    name: str
    weight: float
    #: the regex source, macros expanded (compiled by :attr:`regex` on first use)
    pattern: str
    #: strings one of which every match of ``regex`` contains (:func:`required_literals`);
    #: a view holding none of them cannot match, so it is not searched. None: no such set
    needs: frozenset[str] | None = None
    _compiled: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled pattern, compiled when a view first needs it searched (most texts
        are benign: most signals' regexes are never run in a process)."""
        compiled = self._compiled
        if compiled is None:
            compiled = re.compile(self.pattern)
            object.__setattr__(self, "_compiled", compiled)
        return compiled


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


# characters from most to least frequent in the texts scanned (English letters, space): a
# needed string is looked for only in a view holding its rarest character (any character
# would be correct: a string occurs only where all of its characters do; the rarest one
# rules out the most views)
_FREQUENT = " etaoinsrhldcumfpgwybvkxjqz"


def _rarest(x: str) -> str:
    return max(x, key=lambda c: (_FREQUENT.find(c) if c in _FREQUENT else len(_FREQUENT), c))


@dataclass(frozen=True)
class SignalSet:
    threshold: float
    family_cap: float
    signals: tuple[Signal, ...]
    # every signal's needed strings by their rarest character (:func:`_rarest`)
    _by_char: dict[str, tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _chars: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    # needed string -> the signals (by position) that need it; signals without needs
    _needed_by: dict[str, tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _always: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        strings = sorted({x for s in self.signals for x in (s.needs or ())})
        by_char: dict[str, list[str]] = {}
        for x in strings:
            by_char.setdefault(_rarest(x), []).append(x)
        object.__setattr__(self, "_by_char", {c: tuple(xs) for c, xs in by_char.items()})
        object.__setattr__(self, "_chars", frozenset(by_char))
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
        """The signals' needed strings that occur in ``view`` (overlapping ones, and one
        inside another, included): each string whose rarest character the view holds is
        looked for in it."""
        by_char = self._by_char
        return {x for c in self._chars.intersection(view) for x in by_char[c] if x in view}


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
    """Read the signal file; every problem names the signal. A pattern is compiled here the
    first time this machine sees it (a bad one is an error now, not at a scan), its needed
    strings kept (:func:`_kept_needs`); a pattern seen before is compiled at its first
    search."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    macros: dict[str, str] = {str(k): str(v) for k, v in data.get("macros", {}).items()}

    def expand(pattern: str, name: str) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) not in macros:
                raise SignalFileError(f"{path}: signal {name}: unknown macro {{{m.group(1)}}}")
            return macros[m.group(1)]

        return _MACRO.sub(sub, pattern)

    signals: list[Signal] = []
    kept = _kept_needs()
    for entry in data.get("signal", []):
        name = str(entry.get("name", "?"))
        try:
            pattern = expand(str(entry["pattern"]), name)
            family, weight = str(entry["family"]), float(entry["weight"])
            known = kept.get(_pattern_key(pattern))
            if known is not None:  # compiled and read in an earlier process: valid
                needs = frozenset(known) or None
                signals.append(Signal(family, name, weight, pattern, needs))
                continue
            regex = re.compile(pattern)
            needs = required_literals(pattern)
            kept.put(_pattern_key(pattern), tuple(sorted(needs or ())))
            signals.append(Signal(family, name, weight, pattern, needs, regex))
        except (KeyError, re.error, TypeError, ValueError) as exc:
            raise SignalFileError(f"{path}: signal {name}: {exc}") from None
    return SignalSet(float(data["threshold"]), float(data["family_cap"]), tuple(signals))


def _is_needs(value: object) -> bool:
    return isinstance(value, tuple) and all(isinstance(x, str) and x for x in value)


@functools.cache
def _kept_needs() -> Kept:
    """Each pattern's :func:`required_literals` (``()`` for None), kept per machine
    (:class:`~app.text.segcache.Kept`) under a digest of the pattern: reading 87 patterns'
    parse trees and compiling them cost ≈ 70 ms of every run's start. The file's name
    carries a digest of this module's source (the code that computes the strings) and the
    Python version (whose parser reads the patterns), so a change to either is a new file,
    never a stale answer. A pattern kept there compiled when it was stored, so it is
    compiled again only when a view is searched with it."""
    import sys

    h = hashlib.sha256(f"{sys.version_info[:3]} {_MAX_NEEDS}\n".encode())
    h.update(Path(__file__).read_bytes())
    return Kept(f"rag-signal-needs-{h.hexdigest()[:16]}", _is_needs)


def _pattern_key(pattern: str) -> str:
    return hashlib.blake2b(pattern.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


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
