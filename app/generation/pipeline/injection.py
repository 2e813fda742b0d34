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
once, so :func:`scan` is O(len(text) × number of signals).
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
from dataclasses import dataclass, field
from pathlib import Path

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
    if sum(c.isascii() and c.isalpha() for c in text) >= 12:
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


@dataclass(frozen=True)
class SignalSet:
    threshold: float
    family_cap: float
    signals: tuple[Signal, ...]


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
            signals.append(Signal(str(entry["family"]), name, float(entry["weight"]), regex))
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
    hit: dict[str, tuple[Signal, str]] = {}
    for sig in ss.signals:
        for view in vs:
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
