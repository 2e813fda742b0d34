"""Load a knowledge-base folder and cut it into chunks with stable ids.

A document is a UTF-8 Markdown file with YAML front matter::

    ---
    title: 差旅费报销制度
    acl: [employee]          # who may read it: public, employee, hr, finance, exec
    ---
    # 差旅费报销制度
    ...

Access rule (one place, :func:`can_read`): a reader holding the groups ``user_acl`` may read
a document whose ``acl`` shares a group with ``user_acl ∪ {"public"}``. Everyone holds
``public``; nobody holds anything else implicitly (an ``hr`` user is ``["employee", "hr"]``).

Chunking rule (deterministic; changing it changes chunk ids, so it is versioned as
``CHUNKER_VERSION``):

1. The body is split into blocks at blank lines. A Markdown heading line (``#`` …) always
   starts a new block and becomes the *current heading*.
2. Blocks are appended to the current chunk while the chunk stays within ``MAX_CHARS``
   characters; a heading, or a block that would overflow, closes the chunk. (The heading
   line repeated by rule 4 is not counted against ``MAX_CHARS``.)
3. A single block longer than ``MAX_CHARS`` is cut at sentence ends (``。！？.!?;；``), and
   a sentence longer than ``MAX_CHARS`` is cut every ``MAX_CHARS`` characters.
4. Every chunk's text starts with its heading line (when it has one and does not already
   start with it), so a chunk read alone says what it is about.
5. Chunks are numbered from 0 in document order: ``<kb>:<relative/posix/path>#<n>``.

A chunk also records its *section*: the number of the heading it falls under (0 before the
first heading) and the heading path (``("新员工入职指南", "试用期")``: each enclosing heading,
outermost first, by the number of ``#``). A chunk never spans two sections. Chunk ids move
when text is inserted before them; a golden label that must survive that is anchored to
the passage, not the position (:mod:`app.retrieval.passages`).

:func:`kb_fingerprint` is the content of a loaded KB as a report records it: a hash per
document (path, title, ``acl``, body), one over all of them, and the chunker's and text
analyser's versions — two runs with the same fingerprint retrieved from the same chunks.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from app.errors import DatasetError
from app.limits import limit
from app.safe_io import UnsafeInput, is_dir, read_text
from app.text.analyser import ANALYSER_VERSION
from app.text.segcache import Kept

CHUNKER_VERSION = "1"
MAX_CHARS = 400
#: the ACL groups, the one list: a document's ``acl``, a case's ``acl``, ``rag ask --acl``
#: and :meth:`Pipeline.answer`'s ``user_acl`` all take these and nothing else
Group = Literal["public", "employee", "hr", "finance", "exec"]
ACL_GROUPS: tuple[Group, ...] = get_args(Group)

_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n?", re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+\S")
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])|(?<=\.)(?=\s)")


@dataclass(frozen=True)
class Document:
    kb: str
    path: str  # relative posix path inside the KB folder
    title: str
    acl: tuple[str, ...]
    body: str

    @property
    def doc_id(self) -> str:
        return f"{self.kb}:{self.path}"


@dataclass(frozen=True)
class Chunk:
    chunk_id: str  # "<kb>:<path>#<n>"
    doc_path: str
    title: str
    heading: str
    acl: tuple[str, ...]
    text: str
    index: int
    section: int = 0  # the heading it falls under, counted from 1 (0: before any heading)
    heading_path: tuple[str, ...] = ()  # enclosing headings, outermost first


@dataclass(frozen=True)
class KnowledgeBase:
    name: str
    root: Path
    documents: tuple[Document, ...]
    chunks: tuple[Chunk, ...]

    def chunk(self, chunk_id: str) -> Chunk | None:
        return self._by_id().get(chunk_id)

    def _by_id(self) -> dict[str, Chunk]:
        cached: dict[str, Chunk] | None = self.__dict__.get("_index")
        if cached is None:
            cached = {c.chunk_id: c for c in self.chunks}
            object.__setattr__(self, "_index", cached)
        return cached

    def readable_chunks(self, user_acl: Iterable[str]) -> list[Chunk]:
        groups = frozenset(user_acl)
        return [c for c in self.chunks if can_read(groups, c.acl)]


def can_read(user_acl: Iterable[str], doc_acl: Sequence[str]) -> bool:
    """True when a reader holding ``user_acl`` may read something labelled ``doc_acl``."""
    return readable(held_groups(user_acl), doc_acl)


def held_groups(user_acl: Iterable[str]) -> frozenset[str]:
    """The groups a reader holding ``user_acl`` reads as (``public`` included)."""
    return frozenset(user_acl) | {"public"}


def reader_groups(user_acl: Iterable[str] | str) -> tuple[Group, ...]:
    """A reader's groups as given at the edge (one group or several), checked and sorted:
    what the pipeline records in its trace and the answer log. An unknown group is a
    ``ValueError`` naming it and the known ones (never read as a group nobody holds)."""
    given = {user_acl} if isinstance(user_acl, str) else set(user_acl)
    unknown = sorted(g for g in given if g not in ACL_GROUPS)
    if unknown:
        raise ValueError(
            f"unknown ACL group(s) {unknown} — use one or more of {', '.join(ACL_GROUPS)}"
        )
    return tuple(sorted(cast("set[Group]", given)))


def readable(held: Collection[str], doc_acl: Sequence[str]) -> bool:
    """:func:`can_read` for groups already made by :func:`held_groups` (one reader, many
    documents)."""
    return any(group in held for group in doc_acl)


def parse_document(kb: str, path: str, raw: str) -> Document:
    """Parse one Markdown file with front matter. Raises :class:`DatasetError` on bad input."""
    raw = raw.lstrip("\ufeff").replace("\r\n", "\n")
    match = _FRONT_MATTER.match(raw)
    if not match:
        raise DatasetError(
            f"{path}:1: front matter missing — start the file with '---', 'title: …', "
            "'acl: [employee]', '---'"
        )
    title, acl = _front_matter(path, match.group(1))
    if not isinstance(title, str) or not title.strip():
        raise DatasetError(f"{path}: front matter field 'title' is missing — add 'title: …'")
    if isinstance(acl, str):
        acl = [acl]
    if not isinstance(acl, list) or not acl or not all(isinstance(a, str) for a in acl):
        raise DatasetError(
            f"{path}: front matter field 'acl' is missing — add e.g. 'acl: [employee]' "
            f"(groups: {', '.join(ACL_GROUPS)})"
        )
    unknown = [a for a in acl if a not in ACL_GROUPS]
    if unknown:
        raise DatasetError(
            f"{path}: acl group(s) {unknown} unknown — use one of {', '.join(ACL_GROUPS)}"
        )
    body = raw[match.end() :]
    return Document(kb=kb, path=path, title=title.strip(), acl=tuple(acl), body=body)


def _is_front(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and (isinstance(value[1], str) or _is_names(value[1]))
    )


def _is_names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(a, str) for a in value)


@functools.cache
def _kept_front() -> Kept:
    """The (title, acl) of front matter already read on this machine, by a digest of its
    text: a warm run neither imports nor runs the YAML parser (≈ 30 ms of every run's start
    for the sample KB). Only a well-typed pair is kept; anything else is parsed each time,
    so every error message comes from the parser as before. The file's name carries the
    installed parser's files (size and mtime): another PyYAML is another file."""
    spec = importlib.util.find_spec("yaml")
    stamp = "none"
    if spec is not None and spec.origin:
        st = os.stat(spec.origin)
        stamp = f"{spec.origin} {st.st_size} {st.st_mtime_ns}"
    digest = hashlib.sha256(f"{CHUNKER_VERSION}\n{stamp}".encode()).hexdigest()[:16]
    return Kept(f"rag-front-matter-{digest}", _is_front)


def _front_matter(path: str, text: str) -> tuple[object, object]:
    """The ``title`` and ``acl`` values of a document's front matter ``text``."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    kept = _kept_front().get(key)
    if kept is not None:
        return kept[0], list(kept[1]) if isinstance(kept[1], list) else kept[1]
    import yaml

    try:
        meta = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise DatasetError(f"{path}: front matter is not valid YAML ({exc})") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"{path}:2: front matter must be 'key: value' lines")
    title, acl = meta.get("title"), meta.get("acl")
    if _is_front((title, acl)):
        _kept_front().put(key, (title, acl))
    return title, acl


def _split_long(block: str, limit: int) -> list[str]:
    if len(block) <= limit:
        return [block]
    sentences = [s for s in _SENTENCE_END.split(block) if s]
    pieces: list[str] = []
    current = ""
    for sentence in sentences:
        while len(sentence) > limit:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:limit])
            sentence = sentence[limit:]
        if current and len(current) + len(sentence) > limit:
            pieces.append(current)
            current = ""
        current += sentence
    if current:
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


def _blocks(body: str) -> list[str]:
    """Blocks separated by blank lines; every heading line is a block of its own."""
    blocks: list[str] = []
    current: list[str] = []
    for line in body.split("\n"):
        stripped = line.strip()
        if not stripped or _HEADING.match(stripped):
            if current:
                blocks.append("\n".join(current).strip())
                current = []
            if stripped:
                blocks.append(stripped)
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current).strip())
    return [b for b in blocks if b]


def heading_level(line: str) -> int:
    """How many ``#`` a heading line starts with."""
    return len(line) - len(line.lstrip("#"))


def heading_text(line: str) -> str:
    """A heading line without its ``#`` marks."""
    return line.lstrip("# ").strip()


def chunk_document(doc: Document, max_chars: int | None = None) -> list[Chunk]:
    """Cut a document into chunks by the rule in the module docstring (``max_chars``:
    :data:`MAX_CHARS` when not given, read at call time)."""
    max_chars = MAX_CHARS if max_chars is None else max_chars
    texts: list[tuple[str, str, int, tuple[str, ...]]] = []  # (heading, text, section, path)
    heading = ""
    section = 0
    stack: list[tuple[int, str]] = []  # (level, heading text) of the enclosing headings
    current: list[str] = []

    def close() -> None:
        if current:
            text = "\n\n".join(current)
            if heading and not text.startswith(heading):
                text = f"{heading}\n\n{text}"
            texts.append((heading, text, section, tuple(h for _, h in stack)))
            current.clear()

    for block in _blocks(doc.body):
        if _HEADING.match(block):
            close()
            heading = block
            section += 1
            level = heading_level(block)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading_text(block)))
            current.append(heading)
            continue
        for piece in _split_long(block, max_chars):
            size = sum(len(p) + 2 for p in current)
            if current and size + len(piece) > max_chars and current != [heading]:
                close()
            current.append(piece)
    close()
    return [
        Chunk(
            chunk_id=f"{doc.kb}:{doc.path}#{n}",
            doc_path=doc.path,
            title=doc.title,
            heading=heading_text(h),
            acl=doc.acl,
            text=text,
            index=n,
            section=sec,
            heading_path=path,
        )
        for n, (h, text, sec, path) in enumerate(texts)
    ]


#: documents parsed in this process, by (KB name, path, text): a run checks its dataset
#: against the KB and then builds its pipeline on it, and parses each file once (both are
#: pure functions of these three; the records are frozen)
_PARSED: dict[tuple[str, str, str, int], tuple[Document, tuple[Chunk, ...]]] = {}
_PARSED_MAX = 4096  # documents kept at most (then the memo starts again)


def _parsed(kb_name: str, rel: str, raw: str) -> tuple[Document, tuple[Chunk, ...]]:
    """:func:`parse_document` and :func:`chunk_document` of one file (once per text)."""
    key = (kb_name, rel, raw, MAX_CHARS)
    hit = _PARSED.get(key)
    if hit is None:
        doc = parse_document(kb_name, rel, raw)
        hit = (doc, tuple(chunk_document(doc, MAX_CHARS)))
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = hit
    return hit


def load_kb(root: Path, name: str | None = None) -> KnowledgeBase:
    """Load every ``*.md`` under ``root`` (sorted by path) and chunk it."""
    root = Path(root)
    if not is_dir(root):  # never raises (a too-long name, a loop): simply not a folder
        raise DatasetError(
            f"{root}: knowledge-base folder not found — give --kb a folder of .md files"
        )
    kb_name = name or root.name
    documents: list[Document] = []
    chunks: list[Chunk] = []
    for file in sorted(root.rglob("*.md")):
        rel = file.relative_to(root).as_posix()
        if rel.upper() == "README.MD":
            continue
        try:  # a FIFO / device / loop / over-size file named *.md is refused unread
            raw = read_text(file, max_bytes=limit("kb_file_bytes"), what="knowledge-base document")
        except UnsafeInput as exc:
            raise DatasetError(f"{rel}: {exc.problem} — {exc.fix}") from None
        doc, doc_chunks = _parsed(kb_name, rel, raw)
        documents.append(doc)
        chunks.extend(doc_chunks)
    return KnowledgeBase(name=kb_name, root=root, documents=tuple(documents), chunks=tuple(chunks))


def document_digest(doc: Document) -> str:
    """sha256 of what a document's chunks are made of: path, title, ``acl`` and body."""
    h = hashlib.sha256()
    for part in (doc.path, doc.title, "\x1f".join(doc.acl), doc.body):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def kb_fingerprint(kb: KnowledgeBase) -> dict[str, object]:
    """The content of ``kb`` as a report records it (see the module docstring): ``name``,
    ``sha256`` over every document's digest, ``documents`` (path -> the first 16 hex digits
    of its digest), ``chunks``, ``chunker`` (``"<version>/<max_chars>"``) and ``analyser``."""
    digests = {doc.path: document_digest(doc) for doc in kb.documents}
    total = hashlib.sha256()
    for path in sorted(digests):
        total.update(f"{path}\x00{digests[path]}\n".encode("utf-8", "surrogatepass"))
    return {
        "name": kb.name,
        "sha256": total.hexdigest(),
        "documents": {path: digests[path][:16] for path in sorted(digests)},
        "chunks": len(kb.chunks),
        "chunker": f"{CHUNKER_VERSION}/{MAX_CHARS}",
        "analyser": ANALYSER_VERSION,
    }
