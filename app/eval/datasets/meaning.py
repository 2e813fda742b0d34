"""What a case means against the knowledge base: chunk ids that resolve, golden chunks the
case's ``acl`` may read, refusals without chunks, keywords found in the golden chunks, and
``golden_rewrite`` only with a history. Works on the raw JSON object, so a case with a
schema error is still checked for everything else."""

from __future__ import annotations

import difflib
from typing import Any

from app.eval.datasets.issues import Sink, show
from app.eval.datasets.items import LIST_FIELDS, looks_joined
from app.retrieval.kb import KnowledgeBase, can_read
from app.text.match import contains_any

__all__ = ["check_meaning"]


def _chunk_fix(sink: Sink, kb: KnowledgeBase, chunk_id: str) -> str:
    doc = chunk_id.split("#", 1)[0]
    same_doc = [c for c in kb.chunks if c.chunk_id.split("#", 1)[0] == doc]
    if same_doc:
        listing = "; ".join(f"#{c.index} {c.heading or c.title}" for c in same_doc[:8])
        more = " …" if len(same_doc) > 8 else ""
        return sink.say("chunk.same-doc", last=len(same_doc) - 1, listing=listing + more)
    close = difflib.get_close_matches(chunk_id, [c.chunk_id for c in kb.chunks], n=1, cutoff=0.5)
    if close:
        return sink.say("chunk.close", close=close[0])
    return sink.say("chunk.form") if kb.chunks else sink.say("chunk.none")


def check_meaning(
    sink: Sink,
    line: int,
    obj: dict[str, Any],
    kb: KnowledgeBase | None,
    *,
    gone: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Check ``obj`` against ``kb`` (``gone``: anchored labels whose passage is gone, which
    the caller reports)."""
    acl = obj.get("acl")
    acl_ok = isinstance(acl, list) and bool(acl) and all(isinstance(a, str) for a in acl)
    golden = obj.get("golden_chunk_ids")
    golden_list = golden if isinstance(golden, list) else []
    texts: list[str] = []
    for fld in ("golden_chunk_ids", "acceptable_chunk_ids"):
        ids = obj.get(fld)
        if not isinstance(ids, list) or kb is None:
            continue
        for n, chunk_id in enumerate(ids):
            if not isinstance(chunk_id, str) or chunk_id in gone:
                continue
            chunk = kb.chunk(chunk_id)
            label = f"{fld}[{n}]"
            if chunk is None:
                sink.add(
                    line,
                    label,
                    "unknown-chunk",
                    code="unknown-chunk",
                    fix=_chunk_fix(sink, kb, chunk_id),
                    value=show(chunk_id, 60),
                )
                continue
            if fld == "golden_chunk_ids":
                texts.append(chunk.text)
            if acl_ok and isinstance(acl, list) and not can_read(acl, chunk.acl):
                sink.add(
                    line,
                    label,
                    "acl",
                    code="acl",
                    acl=show(acl),
                    chunk=chunk_id,
                    readers=", ".join(chunk.acl),
                    group=repr(chunk.acl[0]),
                )

    refusal = obj.get("expected_refusal")
    if refusal is True and golden_list:
        sink.add(line, "expected_refusal", "refusal-with-chunks", code="refusal-with-chunks")
    if refusal is not True and isinstance(golden, list | type(None)) and not golden_list:
        sink.add(line, "golden_chunk_ids", "no-chunks", code="no-chunks", severity="warning")

    for fld in LIST_FIELDS:
        items = obj.get(fld)
        for n, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, str) and looks_joined(item):
                sink.add(
                    line,
                    f"{fld}[{n}]",
                    "list-item-joined",
                    code="list-item-joined",
                    severity="warning",
                    value=show(item),
                )
    must = obj.get("must_include")
    if texts and isinstance(must, list):
        for n, word in enumerate(must):
            if isinstance(word, str) and word.strip() and not contains_any(texts, word):
                sink.add(
                    line,
                    f"must_include[{n}]",
                    "keyword-not-in-chunk",
                    code="keyword-not-in-chunk",
                    severity="warning",
                    value=show(word),
                )
    must_not = obj.get("must_not_include")
    if isinstance(must, list) and isinstance(must_not, list):
        for word in must_not:
            if isinstance(word, str) and word in must:
                sink.add(
                    line,
                    "must_not_include",
                    "contradiction",
                    code="contradiction",
                    value=show(word),
                )
    history = obj.get("history")
    rewrite = obj.get("golden_rewrite")
    if isinstance(history, list) and history and rewrite is None:
        sink.add(line, "golden_rewrite", "no-rewrite", code="no-rewrite", severity="warning")
    if isinstance(rewrite, str) and not history:
        sink.add(
            line,
            "golden_rewrite",
            "rewrite-without-history",
            code="rewrite-without-history",
            severity="warning",
        )
