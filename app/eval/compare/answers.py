"""What a delta table must say besides the metric rows (``rag eval compare`` / ``diff-prompt``).

* **Answers changed k of N** and the ids of the changed cases: ten "✅ no meaningful change" rows over
  identical answers mean "not tested", not "harmless".
* When the candidate is an offline baseline and a prompt's wording changed between the runs,
  the baseline ignores wording (it reads the question and the retrieved documents, never the
  instructions), so the table says so and shows how to run the same comparison with a model.
* A run made with ``--allow-unlisted-model`` is named as such (:mod:`app.eval.report.notes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.eval.report.notes import unlisted_note

__all__ = ["AnswerDelta", "answer_delta"]

SHOWN = 20  # changed case ids listed in the markdown (all of them are in the JSON)


@dataclass(frozen=True)
class AnswerDelta:
    paired: int
    changed: tuple[str, ...]
    wording_changed: tuple[str, ...]  # prompt ids whose version or content hash differ
    offline_candidate: str | None  # the offline candidate's name, when there is one
    notes: tuple[str, ...] = ()

    def markdown(self, judge_only: int | None = None) -> list[str]:
        """``judge_only``: the cases whose answer is identical and whose judge score moved
        (ruler movement, not a change of the prompt)."""
        shown = ", ".join(f"`{c}`" for c in self.changed[:SHOWN])
        more = f" … and {len(self.changed) - SHOWN} more" if len(self.changed) > SHOWN else ""
        judged = f"; judge-only changes: {judge_only}" if judge_only is not None else ""
        lines = [
            f"**Answers changed: {len(self.changed)} of {self.paired}{judged}**"
            + (f" — {shown}{more}" if self.changed else "")
            + ".",
            "",
        ]
        lines += [f"> {n}" for n in self.notes]
        if self.notes:
            lines.append("")
        return lines


def _prompts(meta: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    refs = meta.get("prompts") or {}
    return {
        str(pid): (ref.get("version"), ref.get("hash"))
        for pid, ref in refs.items()
        if isinstance(ref, Mapping)
    }


def _base_id(pid: str) -> str:
    head, sep, tail = pid.rpartition("_v")
    return head if sep and tail.isdigit() else pid


def answer_delta(
    base_meta: Mapping[str, Any],
    new_meta: Mapping[str, Any],
    paired: int,
    changed: Sequence[str],
    base_name: str = "base",
    new_name: str = "new",
) -> AnswerDelta:
    """The answer delta of ``paired`` cases of which ``changed`` (ids) answered differently,
    and the prompt wording of two reports' ``meta`` (JSON data)."""
    bm, nm = base_meta, new_meta
    # pair prompts by their id without the version (system/kb_qa_v2 vs system/kb_qa_v3)
    bp_by: dict[str, set[tuple[Any, Any]]] = {}
    np_by: dict[str, set[tuple[Any, Any]]] = {}
    for refs, into in ((_prompts(bm), bp_by), (_prompts(nm), np_by)):
        for key, ref in refs.items():
            into.setdefault(_base_id(str(ref[0] or key)), set()).add(ref)
    wording = tuple(sorted(k for k in bp_by.keys() & np_by.keys() if bp_by[k] != np_by[k]))
    offline = None
    for meta in (nm, bm):
        cand = meta.get("candidate") or {}
        if cand.get("offline"):
            offline = str(cand.get("provider"))
            break
    notes = tuple(
        n for n in (unlisted_note(bm, base_name), unlisted_note(nm, new_name)) if n is not None
    )
    return AnswerDelta(
        paired=paired,
        changed=tuple(changed),
        wording_changed=wording,
        offline_candidate=offline,
        notes=notes,
    )
