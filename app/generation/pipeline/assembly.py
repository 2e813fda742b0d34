"""Score-aware context assembly (seed 002 + seed 004 §5.3).

Given the reranked hits (scores in [0, 1], see :mod:`app.retrieval.bm25`):

============  =======================  ===========================================
mode          when                     context
============  =======================  ===========================================
``no_hits``   zero hits                none — a fixed reply, **no LLM call**
``refusal``   top-1 < ``low_floor``    none — the refusal prompt
``strict``    top-1 ≥ ``high_floor``   hits ≥ ``strict_ratio``·top-1, at most 2
``assisted``  otherwise                hits ≥ ``low_floor``, at most 3
============  =======================  ===========================================

Defaults: ``low_floor`` 0.45 (seed 002's code), ``high_floor`` 0.88, ``strict_ratio`` 0.75.

Documents are numbered from 1 in score order, so a citation ``[n]`` maps to
``documents[n-1].chunk_id``. Two context layouts:

* ``xml`` (our ``system/kb_*`` prompts): each document in a
  ``<document index="n" title="…" section="…">`` tag, its text escaped so retrieved text
  cannot close the tag or the ``<参考资料>`` section;

Document texts (context and ``metadata["documents"]``) are the chunk's body without its
leading Markdown heading line; the heading is the ``section`` attribute.
* ``colossalqa`` (the ``system/retrieval_qa_*`` prompts, seed 000's ``CustomStuffDocumentsChain``):
  ``Supporting Document{n}:`` prefixes joined by a blank line.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.generation.pipeline.safety import escape_xml
from app.retrieval.index import Hit
from app.retrieval.kb import Chunk

Mode = Literal["no_hits", "refusal", "strict", "assisted"]
Layout = Literal["xml", "colossalqa"]


@dataclass(frozen=True)
class Floors:
    low: float = 0.45
    high: float = 0.88
    strict_ratio: float = 0.75
    strict_max_docs: int = 2
    assisted_max_docs: int = 3


@dataclass(frozen=True)
class Assembly:
    mode: Mode
    top1: float | None
    documents: tuple[Hit, ...]  # [1] first

    @property
    def chunk_ids(self) -> list[str]:
        return [h.chunk_id for h in self.documents]

    def context(self, layout: Layout = "xml") -> str:
        return format_context(self.documents, layout)

    def documents_json(self) -> str:
        """``metadata["documents"]`` for offline providers: the numbered texts, [1] first."""
        # json.dumps of the list, from each body's JSON string kept per chunk text
        return "[" + ", ".join([_json_body(h.chunk.text) for h in self.documents]) + "]"


def select(hits: Sequence[Hit], floors: Floors | None = None) -> Assembly:
    """Pick the mode and the documents from reranked hits (any order)."""
    f = floors or Floors()
    ranked = sorted(hits, key=lambda h: (-h.score, -h.raw_score, h.chunk_id))
    if not ranked:
        return Assembly("no_hits", None, ())
    top1 = ranked[0].score
    if top1 < f.low:
        return Assembly("refusal", top1, ())
    if top1 >= f.high:
        docs = [h for h in ranked if h.score >= f.strict_ratio * top1][: f.strict_max_docs]
        return Assembly("strict", top1, tuple(docs))
    docs = [h for h in ranked if h.score >= f.low][: f.assisted_max_docs]
    return Assembly("assisted", top1, tuple(docs))


_HEADING_LINE = re.compile(r"\A#{1,6}\s+[^\n]*\n+")


def body(chunk: Chunk) -> str:
    """The chunk's text without its leading Markdown heading line (the heading travels as
    the ``section`` attribute), so a heading is never mistaken for an answer sentence."""
    return _body(chunk.text)


# pure functions of a chunk's text, kept for the knowledge base's chunks (a case's documents
# are KB chunks, each read twice per answer: the context and metadata["documents"])
@functools.lru_cache(maxsize=4096)
def _body(text: str) -> str:
    stripped = _HEADING_LINE.sub("", text, count=1).strip()
    return stripped or text.lstrip("# ").strip()


@functools.lru_cache(maxsize=4096)
def _escaped_body(text: str) -> str:
    return escape_xml(_body(text))


@functools.lru_cache(maxsize=4096)
def _json_body(text: str) -> str:
    return json.dumps(_body(text), ensure_ascii=False)


def format_context(documents: Sequence[Hit], layout: Layout = "xml") -> str:
    if layout == "colossalqa":
        return "\n\n".join(
            f"Supporting Document{n}:\n{body(h.chunk)}" for n, h in enumerate(documents, 1)
        )
    parts = []
    for n, h in enumerate(documents, 1):
        section = f' section="{escape_xml(h.chunk.heading)}"' if h.chunk.heading else ""
        parts.append(
            f'<document index="{n}" title="{escape_xml(h.chunk.title)}"{section}>\n'
            f"[{n}] {_escaped_body(h.chunk.text)}\n</document>"
        )
    return "\n".join(parts)


def layout_for(prompt_id: str) -> Layout:
    """ColossalQA numbering for the ``retrieval_qa_*`` prompts, XML documents otherwise."""
    return "colossalqa" if "/retrieval_qa" in prompt_id else "xml"
