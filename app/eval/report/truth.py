"""Whether two runs measured against the same ground truth, and what differs when not.

A report's meta carries fingerprints of what its numbers were measured against: the
knowledge base (:class:`~app.eval.report.records.KbRef`: each document's hash, the chunker
and the text analyser), each prompt's content hash beside its version name, the dataset
files' hashes and the retriever as resolved (``--retriever auto`` becomes ``bm25`` when the
embedder is missing). :func:`truth_differences` names every difference in the knowledge
base, in a prompt's content under one version name and in the resolved retriever — the
three a version name or a setting does not show. (The datasets are compared with the
rulers: :func:`app.eval.compare.rulers.ruler_differences`, and by ``rag eval merge``.)

``rag eval merge`` refuses shards with any such difference, ``rag eval compare`` two runs;
both accept them with ``--allow-truth-change``, and then say so (a merged report lists them
in ``meta.truth_waived``, which a comparison prints).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.eval.report.records import KbRef, RunMeta

__all__ = ["kb_differences", "truth_differences", "truth_unknowns"]

_SHOWN = 6  # document paths named per kind of change


def _paths(label: str, paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_SHOWN])
    more = f" (+{len(paths) - _SHOWN} more)" if len(paths) > _SHOWN else ""
    return f"{label} {shown}{more}"


def kb_differences(a: KbRef, b: KbRef, names: tuple[str, str]) -> list[str]:
    """What differs between two knowledge-base fingerprints (empty: the same KB)."""
    out: list[str] = []
    an, bn = names
    if a.sha256 != b.sha256:
        changed = sorted(
            p for p in a.documents.keys() & b.documents.keys() if a.documents[p] != b.documents[p]
        )
        added = sorted(b.documents.keys() - a.documents.keys())
        removed = sorted(a.documents.keys() - b.documents.keys())
        parts = [
            _paths(label, paths)
            for label, paths in (
                ("changed:", changed),
                (f"only in {bn}:", added),
                (f"only in {an}:", removed),
            )
            if paths
        ]
        detail = f" ({'; '.join(parts)})" if parts else ""
        out.append(
            f"knowledge base content: {an} {a.name} {a.sha256[:12]}… vs {bn} {b.name} "
            f"{b.sha256[:12]}…{detail}"
        )
    if a.chunker != b.chunker:
        out.append(f"chunker (version/max chars): {an} {a.chunker} vs {bn} {b.chunker}")
    if a.analyser != b.analyser:
        out.append(f"text analyser version: {an} {a.analyser} vs {bn} {b.analyser}")
    return out


def _retriever(meta: RunMeta, strict: bool) -> object:
    """The resolved retriever as compared: all of it for shards of one run (``strict``),
    its kind and embedder for two runs."""
    info = meta.retrieval
    if strict:
        return info
    return (info.get("name"), info.get("embedder"))


def _retriever_text(meta: RunMeta) -> str:
    info = meta.retrieval
    name = str(info.get("name") or "unknown")
    return f"{name} ({info['embedder']})" if info.get("embedder") else name


def truth_differences(
    a: RunMeta, b: RunMeta, names: tuple[str, str] = ("base", "new"), *, strict: bool = False
) -> list[str]:
    """Every difference in the ground truth of two runs (see the module docstring), each a
    sentence naming both sides. ``strict`` (shards of one run): the resolved retriever must
    match whole; otherwise (two runs compared) its kind and embedder must, when both runs
    asked for the same ``--retriever`` (asking for another one is the experiment)."""
    out: list[str] = []
    an, bn = names
    if a.kb is not None and b.kb is not None:
        out += kb_differences(a.kb, b.kb, names)
    for pid in sorted(a.prompts.keys() & b.prompts.keys()):
        pa, pb = a.prompts[pid], b.prompts[pid]
        if pa.version == pb.version and pa.hash and pb.hash and pa.hash != pb.hash:
            out.append(
                f"prompt {pa.version}: the same version with different content ({an} "
                f"{pa.hash.removeprefix('sha256:')[:12]}… vs {bn} "
                f"{pb.hash.removeprefix('sha256:')[:12]}…)"
            )
    asked_a, asked_b = a.config.retriever, b.config.retriever
    compared = (strict or asked_a == asked_b) and a.retrieval and b.retrieval
    if compared and _retriever(a, strict) != _retriever(b, strict):
        ra, rb = _retriever_text(a), _retriever_text(b)
        if ra == rb:  # the same kind and embedder: the calibration constants differ
            ra = f"{ra} {a.retrieval.get('calibration')}"
            rb = f"{rb} {b.retrieval.get('calibration')}"
        out.append(
            f"retriever as resolved: {an} {ra} vs {bn} {rb} (both asked --retriever {asked_a})"
        )
    return out


def truth_unknowns(a: RunMeta, b: RunMeta, names: tuple[str, str] = ("base", "new")) -> list[str]:
    """What could not be compared: a report without a knowledge-base fingerprint."""
    missing = [n for n, m in zip(names, (a, b), strict=True) if m.kb is None]
    if not missing:
        return []
    return [
        f"{' and '.join(missing)} record{'s' if len(missing) == 1 else ''} no knowledge-base "
        "fingerprint (a report older than fingerprints): whether both runs retrieved from "
        "the same knowledge base is not known."
    ]
