"""Instant feedback on a case: what the offline pipeline does with it, before the next full run.

For each case the editor saves (or asks about), the pipeline's own retrieval and score-aware
assembly run on the case's question with the case's ``acl`` — no model call:

* **ranks**: where each golden chunk lands in the retrieval ranking (1 = first) among the
  chunks the case's user may read, and whether the assembly puts it into the context;
* **must_include**: whether each word occurs in the golden passage(s) (the checker's
  matcher, :func:`app.text.match.contains_any`);
* **mode**: the assembly mode the top score selects (strict ≥ 0.88, assisted ≥ 0.45, refusal
  below; seed 002) against ``expected_refusal``;
* **acl**: the groups that can read each golden chunk, and whether the case's user is one.

A multi-turn case is asked with its ``golden_rewrite`` (the question retrieval would see after
the rewrite step). The retriever is the pipeline's default (:class:`PipelineConfig`: BM25
fused with the dense embedder when it is installed), built once per editor.
"""

from __future__ import annotations

import time
from typing import Any

from app.eval.datasets.messages import Lang
from app.generation.pipeline.assembly import select
from app.generation.pipeline.config import PipelineConfig
from app.retrieval.choose import make_retriever
from app.retrieval.kb import KnowledgeBase, can_read
from app.retrieval.rerank import get_reranker, merge_hits
from app.text.match import contains_any

__all__ = ["Feedback"]

REFUSING = frozenset({"refusal", "no_hits"})


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


class Feedback:
    """The offline pipeline's retrieval and assembly for the KB ``kb``."""

    def __init__(self, kb: KnowledgeBase, config: PipelineConfig | None = None) -> None:
        self.kb = kb
        self.config = config or PipelineConfig()
        self.retriever = make_retriever(kb, self.config.retriever, self.config.embedder)
        self.reranker = get_reranker(self.config.reranker, self.retriever)

    def case(self, case: dict[str, Any]) -> dict[str, Any]:
        """The four facts for one case (a raw case object, as the editor holds it)."""
        started = time.perf_counter()
        question = _question(case)
        acl = _strings(case.get("acl"))
        ranking = self.retriever.search(question, acl, k=len(self.kb.chunks))
        rank = {h.chunk_id: n for n, h in enumerate(ranking, start=1)}
        top = ranking[: self.config.top_k]
        hits = self.reranker.rerank([question], merge_hits(top), acl)
        assembly = select(hits, self.config.floors)
        in_context = set(assembly.chunk_ids)
        golden = []
        texts = []
        for chunk_id in _strings(case.get("golden_chunk_ids")):
            chunk = self.kb.chunk(chunk_id)
            if chunk is None:
                golden.append({"id": chunk_id, "exists": False})
                continue
            texts.append(chunk.text)
            golden.append(
                {
                    "id": chunk_id,
                    "exists": True,
                    "heading": chunk.heading,
                    "rank": rank.get(chunk_id),  # None: the case's user may not read it
                    "in_context": chunk_id in in_context,
                    "acl": list(chunk.acl),
                    "readable": can_read(acl, chunk.acl),
                }
            )
        words = [
            {"word": w, "found": bool(texts) and contains_any(texts, w)}
            for w in _strings(case.get("must_include"))
        ]
        expected = case.get("expected_refusal") is True
        refuses = assembly.mode in REFUSING
        return {
            "id": case.get("id"),
            "question": question,
            "acl": acl,
            "golden": golden,
            "must_include": words,
            "mode": assembly.mode,
            "top1": None if assembly.top1 is None else round(assembly.top1, 3),
            "context": list(assembly.chunk_ids),
            "expected_refusal": expected,
            "mode_ok": refuses == expected,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }

    def cases(self, cases: list[dict[str, Any]], lang: Lang = "en") -> list[dict[str, Any]]:
        del lang  # the page words the facts in its own language
        prefetch = getattr(self.retriever, "prefetch", None)  # dense: new questions in a batch
        if prefetch is not None:
            prefetch([_question(c) for c in cases])
        return [self.case(c) for c in cases]


def _question(case: dict[str, Any]) -> str:
    """What retrieval sees: a multi-turn case's ``golden_rewrite``, else its question."""
    history = case.get("history")
    rewrite = case.get("golden_rewrite")
    return str(
        rewrite if history and isinstance(rewrite, str) and rewrite else case.get("question")
    )
