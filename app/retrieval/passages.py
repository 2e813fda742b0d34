"""Golden labels anchored to text: a passage of a document, found again after the KB changed.

A chunk id (``sample:hr/onboarding.md#2``) is a position: text inserted above it, or a
different ``max_chars``, moves it. An *anchor* names the passage the id pointed at when the
label was written, independently of how the document is cut:

``{"heading": ["新员工入职指南", "报到"], "quote": "入职第一天上午 9:00 到深圳总部…",
"chars": 96, "sha256": "3fa4c0d2e1b7a9f0"}``

* the passage is the chunk's text without its heading line, with every white-space
  character removed (the *normal form*: chunk boundaries, the blank lines between blocks
  and the stripped ends of cut sentences leave no trace in it);
* ``chars`` is the length of that normal form, ``sha256`` the first 16 hex digits of its
  hash, ``quote`` its first :data:`QUOTE_CHARS` characters as written (for people, and to
  find it), ``heading`` the enclosing headings (to prefer the right one of two copies).

Resolving (:meth:`PassageIndex.resolve`): a document's *stream* is the normal form of its
chunks' bodies, one after another. The passage still exists where the stream holds the
quote followed by ``chars`` characters with the recorded hash — in the same document, or
(a renamed document) in any other. It resolves to the chunk(s) of the current cut that the
passage overlaps, in document order: the same single chunk when only text elsewhere
changed; the one larger chunk that now contains it (a larger ``max_chars``); the pieces
it was cut into (a smaller one). A passage that is not found has changed or vanished: the
resolution then lists the nearest chunks (same heading first, then by shared character
pairs with the quote) for the error and the re-point.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.retrieval.kb import Chunk, KnowledgeBase

__all__ = [
    "QUOTE_CHARS",
    "Anchor",
    "PassageIndex",
    "Resolution",
    "anchor_of",
    "body_of",
    "normal",
    "passage_index",
]

QUOTE_CHARS = 24  # characters of the passage (white space not counted) kept as its quote
_SPACE = re.compile(r"\s+")
_CANDIDATES = 3


def normal(text: str) -> str:
    """``text`` without any white space (the form passages are compared in)."""
    return _SPACE.sub("", text)


def body_of(chunk: Chunk) -> str:
    """A chunk's text without the heading line it starts with (rule 4 of the chunker)."""
    if chunk.heading and chunk.text.lstrip().startswith("#"):
        return chunk.text.lstrip().split("\n", 1)[1] if "\n" in chunk.text.strip() else ""
    return chunk.text


def _quote(body: str) -> str:
    """The start of ``body`` as written (runs of white space as one space) holding
    :data:`QUOTE_CHARS` non-space characters."""
    out: list[str] = []
    count = 0
    for ch in _SPACE.sub(" ", body.strip()):
        if count >= QUOTE_CHARS:
            break
        out.append(ch)
        count += 0 if ch == " " else 1
    return "".join(out).strip()


@dataclass(frozen=True)
class Anchor:
    """Where a labelled passage is, independent of chunk positions (module docstring)."""

    heading: tuple[str, ...]
    quote: str
    chars: int
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {
            "heading": list(self.heading),
            "quote": self.quote,
            "chars": self.chars,
            "sha256": self.sha256,
        }

    def shown(self, doc: str) -> str:
        """``hr/onboarding.md › 新员工入职指南 › 报到: "入职第一天…"`` (for messages)."""
        path = " › ".join((doc, *self.heading))
        return f'{path}: "{self.quote}…"'


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def anchor_of(chunk: Chunk) -> Anchor | None:
    """The anchor of the passage ``chunk`` holds now (``None``: a heading without text)."""
    body = body_of(chunk)
    norm = normal(body)
    if not norm:
        return None
    return Anchor(
        heading=chunk.heading_path,
        quote=_quote(body),
        chars=len(norm),
        sha256=_digest(norm),
    )


def _pairs(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)} or {text}


@dataclass(frozen=True)
class Resolution:
    """Where an anchor points now: ``chunk_ids`` (empty: the passage changed or vanished)
    and, when it is gone, the nearest ``candidates``."""

    chunk_ids: tuple[str, ...]
    candidates: tuple[Chunk, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.chunk_ids)


@dataclass
class _Stream:
    chunks: tuple[Chunk, ...]
    text: str
    starts: tuple[int, ...]  # where each chunk's body starts in ``text``


@dataclass
class PassageIndex:
    """The documents of one KB in normal form (built lazily, a document at a time)."""

    kb: KnowledgeBase
    _docs: dict[str, list[Chunk]] = field(default_factory=dict)
    _streams: dict[str, _Stream] = field(default_factory=dict)
    _own: dict[str, tuple[int, str]] = field(default_factory=dict)  # id -> (chars, sha256)
    _memo: dict[tuple[str, Anchor], Resolution] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for chunk in self.kb.chunks:
            self._docs.setdefault(chunk.doc_path, []).append(chunk)

    def _stream(self, doc: str) -> _Stream | None:
        stream = self._streams.get(doc)
        if stream is None:
            chunks = self._docs.get(doc)
            if chunks is None:
                return None
            parts, starts, at = [], [], 0
            for chunk in chunks:
                starts.append(at)
                norm = normal(body_of(chunk))
                parts.append(norm)
                at += len(norm)
            stream = self._streams[doc] = _Stream(tuple(chunks), "".join(parts), tuple(starts))
        return stream

    def _find(self, doc: str, anchor: Anchor) -> tuple[str, ...]:
        stream = self._stream(doc)
        quote = normal(anchor.quote)
        if stream is None or not quote:
            return ()
        found: list[tuple[str, ...]] = []
        at = stream.text.find(quote)
        while at >= 0:
            end = at + anchor.chars
            if end <= len(stream.text) and _digest(stream.text[at:end]) == anchor.sha256:
                ids = tuple(
                    c.chunk_id
                    for c, start, nxt in zip(
                        stream.chunks,
                        stream.starts,
                        (*stream.starts[1:], len(stream.text)),
                        strict=True,
                    )
                    if start < end and nxt > at and nxt > start
                )
                first = next(c for c in stream.chunks if c.chunk_id == ids[0])
                if first.heading_path == anchor.heading:
                    return ids
                found.append(ids)
            at = stream.text.find(quote, at + 1)
        return found[0] if found else ()

    def resolve(self, chunk_id: str, anchor: Anchor) -> Resolution:
        """The chunk(s) holding ``anchor``'s passage now; ``chunk_id`` (as the label was
        written) names its document, searched first. (Many cases label the same passage:
        each (id, anchor) is resolved once.)"""
        key = (chunk_id, anchor)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._resolve(chunk_id, anchor)
        return hit

    def _same(self, chunk_id: str, anchor: Anchor) -> bool:
        return self.holds(chunk_id, anchor.chars, anchor.sha256)

    def holds(self, chunk_id: str, chars: object, sha256: object) -> bool:
        """Whether chunk ``chunk_id`` holds exactly the passage of length ``chars`` and hash
        ``sha256`` (nothing moved: the common case, decided without building an anchor)."""
        own = self._own.get(chunk_id)
        if own is None:
            chunk = self.kb.chunk(chunk_id)
            norm = normal(body_of(chunk)) if chunk is not None else ""
            own = self._own[chunk_id] = (len(norm), _digest(norm) if norm else "")
        return own == (chars, sha256)

    def _resolve(self, chunk_id: str, anchor: Anchor) -> Resolution:
        if self._same(chunk_id, anchor):
            return Resolution((chunk_id,))
        doc = chunk_id.split(":", 1)[-1].rsplit("#", 1)[0]
        ids = self._find(doc, anchor)
        if not ids:
            for other in self._docs:
                if other != doc and (ids := self._find(other, anchor)):
                    break
        if ids:
            return Resolution(ids)
        return Resolution((), self.nearest(doc, anchor))

    def nearest(self, doc: str, anchor: Anchor) -> tuple[Chunk, ...]:
        """The chunks most like ``anchor``'s passage: of its document (every document when
        it is gone), same heading first, then by character pairs shared with the quote."""
        pool: Sequence[Chunk] = self._docs.get(doc) or self.kb.chunks
        want = _pairs(normal(anchor.quote))

        def score(chunk: Chunk) -> tuple[int, float]:
            have = _pairs(normal(body_of(chunk)))
            return (chunk.heading_path == anchor.heading, len(want & have) / len(want))

        ranked = sorted(
            (c for c in pool if normal(body_of(c))), key=lambda c: score(c), reverse=True
        )
        return tuple(ranked[:_CANDIDATES])


def passage_index(kb: KnowledgeBase) -> PassageIndex:
    """The :class:`PassageIndex` of ``kb`` (one per loaded KB, kept on it)."""
    cached: PassageIndex | None = kb.__dict__.get("_passages")
    if cached is None:
        cached = PassageIndex(kb)
        object.__setattr__(kb, "_passages", cached)
    return cached
