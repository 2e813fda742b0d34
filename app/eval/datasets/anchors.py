"""Golden labels that follow their passage: resolving a case's ``anchors`` against the KB,
writing anchors (``rag datasets anchor``) and re-pointing a broken label
(``rag datasets repoint``).

A case's ``golden_chunk_ids`` / ``acceptable_chunk_ids`` stay what a person reads; its
``anchors`` map each labelled id (as written) to the passage it pointed at
(:mod:`app.retrieval.passages`). Every check — and so every run, which loads its dataset
through the check — resolves the anchors against the KB it was given: a passage that still
exists yields the chunk(s) holding it now (the same id when nothing moved), silently; one
that changed or vanished is an error naming the case, the old passage and the nearest
chunks, with the ``rag datasets repoint`` command that fixes it. A label without an anchor
is a position, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import DatasetError
from app.eval.datasets.case import available_suites, iter_lines
from app.eval.datasets.issues import Sink
from app.retrieval.kb import Chunk, KnowledgeBase
from app.retrieval.passages import Anchor, anchor_of, body_of, passage_index

__all__ = [
    "LABEL_FIELDS",
    "Broken",
    "add_anchors",
    "anchor_from_json",
    "anchor_suite",
    "repoint_case",
    "repoint_command",
    "report_broken",
    "resolve_labels",
    "unlisted_anchors",
]

LABEL_FIELDS = ("golden_chunk_ids", "acceptable_chunk_ids")


def anchor_from_json(value: object) -> Anchor | None:
    """An :class:`Anchor` from a case's JSON (``None`` when malformed: the field check
    reports it)."""
    if not isinstance(value, dict):
        return None
    heading, quote, chars, sha = (value.get(k) for k in ("heading", "quote", "chars", "sha256"))
    if not (
        isinstance(heading, list)
        and all(isinstance(h, str) for h in heading)
        and isinstance(quote, str)
        and isinstance(chars, int)
        and not isinstance(chars, bool)
        and isinstance(sha, str)
    ):
        return None
    return Anchor(tuple(heading), quote, chars, sha)


@dataclass(frozen=True)
class Broken:
    """A label whose passage changed or vanished."""

    field: str  # "golden_chunk_ids[0]"
    chunk_id: str  # as written
    anchor: Anchor
    candidates: tuple[Chunk, ...]

    @property
    def doc(self) -> str:
        return self.chunk_id.split(":", 1)[-1].rsplit("#", 1)[0]


def resolve_labels(obj: dict[str, Any], kb: KnowledgeBase) -> tuple[dict[str, Any], list[Broken]]:
    """``obj`` with each anchored label replaced by the chunk id(s) holding its passage in
    ``kb`` (the same object when nothing changed), and the labels that could not be
    resolved (left as written)."""
    anchors = obj.get("anchors")
    if not isinstance(anchors, dict) or not anchors:
        return obj, []
    index = passage_index(kb)
    broken: list[Broken] = []
    out = obj
    for fld in LABEL_FIELDS:
        ids = obj.get(fld)
        if not isinstance(ids, list):
            continue
        resolved: list[object] = []
        for n, chunk_id in enumerate(ids):
            raw = anchors.get(chunk_id) if isinstance(chunk_id, str) else None
            if (
                isinstance(raw, dict)
                and isinstance(chunk_id, str)
                and index.holds(chunk_id, raw.get("chars"), raw.get("sha256"))
            ):
                resolved.append(chunk_id)  # nothing moved (the recorded heading is not needed)
                continue
            anchor = anchor_from_json(raw)
            if anchor is None or not isinstance(chunk_id, str):
                resolved.append(chunk_id)
                continue
            found = index.resolve(chunk_id, anchor)
            if found.found:
                resolved.extend(found.chunk_ids)
            else:
                resolved.append(chunk_id)
                broken.append(Broken(f"{fld}[{n}]", chunk_id, anchor, found.candidates))
        if all(isinstance(x, str) for x in resolved):
            resolved = list(dict.fromkeys(resolved))
        if resolved != ids:
            if out is obj:
                out = dict(obj)
            out[fld] = resolved
    return out, broken


def unlisted_anchors(obj: dict[str, Any]) -> list[str]:
    """The keys of ``obj``'s ``anchors`` that neither label field lists."""
    anchors = obj.get("anchors")
    if not isinstance(anchors, dict):
        return []
    labelled: set[object] = set()
    for fld in LABEL_FIELDS:
        ids = obj.get(fld)
        labelled |= {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()
    return [k for k in anchors if k not in labelled]


def report_broken(sink: Sink, line: int, case_id: object, broken: Broken) -> None:
    """The error of a label whose passage changed or vanished: the case, the old passage,
    the nearest chunks now and the one command that re-points it."""
    near = "; ".join(f'{c.chunk_id} "{_short(body_of(c))}"' for c in broken.candidates) or sink.say(
        "passage-gone.none"
    )
    command = repoint_command(
        str(case_id), broken.chunk_id, broken.candidates[0] if broken.candidates else None
    )
    sink.add(
        line,
        broken.field,
        "passage-gone",
        code="passage-gone",
        case=str(case_id),
        chunk=broken.chunk_id,
        old=broken.anchor.shown(broken.doc),
        near=near,
        command=command,
    )


def _short(text: str, limit: int = 30) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def add_anchors(obj: dict[str, Any], kb: KnowledgeBase, *, replace: bool = False) -> bool:
    """Give every labelled chunk of ``obj`` that exists in ``kb`` an anchor (``replace``: also
    those that have one). Returns whether ``obj`` changed; ``anchors`` is the last field, and
    entries for ids no longer labelled are dropped."""
    old = obj.get("anchors")
    anchors: dict[str, Any] = dict(old) if isinstance(old, dict) else {}
    labelled: list[str] = []
    for fld in LABEL_FIELDS:
        ids = obj.get(fld)
        labelled += [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
    for chunk_id in labelled:
        if chunk_id in anchors and not replace:
            continue
        chunk = kb.chunk(chunk_id)
        anchor = anchor_of(chunk) if chunk is not None else None
        if anchor is not None:
            anchors[chunk_id] = anchor.to_json()
    anchors = {k: anchors[k] for k in dict.fromkeys(labelled) if k in anchors}
    if anchors == (old if isinstance(old, dict) else {}):
        return False
    rebuilt = {k: v for k, v in obj.items() if k != "anchors"}
    if anchors:
        rebuilt["anchors"] = anchors  # last: the fields people write come first
    obj.clear()
    obj.update(rebuilt)
    return True


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _rewrite(text: str, change: Any) -> tuple[str, list[str]]:
    """``text`` (JSONL) with ``change(obj) -> bool`` applied to every case line; the lines
    it did not change are kept byte for byte. Returns the text and the changed ids."""
    lines: list[str] = []
    changed: list[str] = []
    newline = "\r\n" if "\r\n" in text else "\n"
    for _, line in iter_lines(text):
        try:
            obj = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and change(obj):
            lines.append(_dump(obj))
            changed.append(str(obj.get("id")))
        else:
            lines.append(line)
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return bom + newline.join(lines), changed


def anchor_suite(path: Path, kb: KnowledgeBase, *, replace: bool = False) -> list[str]:
    """Write anchors into the dataset file ``path`` for every label that has none (the
    migration; ``replace``: re-anchor every label at its current chunk). Returns the ids of
    the cases that changed."""
    text = path.read_text(encoding="utf-8")
    new, changed = _rewrite(text, lambda obj: add_anchors(obj, kb, replace=replace))
    if changed:
        path.write_text(new, encoding="utf-8")
    return changed


def repoint_command(case_id: str, chunk_id: str, to: Chunk | None) -> str:
    """The command that re-points one broken label (to the nearest chunk when known)."""
    target = to.chunk_id if to is not None else "<chunk id>"
    return f"rag datasets repoint {case_id} {chunk_id} {target}"


def _case_in(path: Path, case_id: str) -> dict[str, Any] | None:
    for _, line in iter_lines(path.read_text(encoding="utf-8")):
        try:
            obj = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and obj.get("id") == case_id:
            return obj
    return None


def _newest(folder: Path, case_id: str) -> tuple[str, Path, Path | None]:
    """The suite holding ``case_id``, its newest file and the version before it."""
    for name, versions in available_suites(folder).items():
        path = versions[-1][1]
        if _case_in(path, case_id) is not None:
            return name, path, versions[-2][1] if len(versions) > 1 else None
    raise DatasetError(
        f"case '{case_id}' is in no dataset file of {folder} — check the id "
        "(`rag datasets check` names the case of every broken label)"
    )


def repoint_case(
    folder: Path, case_id: str, old_id: str, new_ids: list[str], kb: KnowledgeBase
) -> tuple[Path, str]:
    """Re-point case ``case_id``'s label ``old_id`` to ``new_ids`` (chunks of ``kb``) with
    fresh anchors, in the next version of its suite (the newest file when it is still a
    draft, i.e. not yet committed). Returns the file written and the suite's version."""
    from app.eval.datasets.case import parse_file_name
    from app.eval.datasets.versions import append_note, case_version, is_released, new_version

    for new in new_ids:
        if kb.chunk(new) is None:
            raise DatasetError(
                f"{new}: no such chunk in the knowledge base {kb.root} — pick one of the "
                "candidates `rag datasets check` lists (or `rag kb chunks`)"
            )
    suite, path, before = _newest(folder, case_id)
    text = path.read_text(encoding="utf-8")
    released = is_released(path)
    # the case as last released: its version is raised past that one (once)
    old = _case_in(path, case_id) if released else (_case_in(before, case_id) if before else None)
    seen = False

    def change(obj: dict[str, Any]) -> bool:
        nonlocal seen
        if obj.get("id") != case_id:
            return False
        hit = False
        for fld in LABEL_FIELDS:
            ids = obj.get(fld)
            if isinstance(ids, list) and old_id in ids:
                at = ids.index(old_id)
                rest = ids[:at] + ids[at + 1 :]
                merged = ids[:at] + [n for n in new_ids if n not in rest] + ids[at + 1 :]
                obj[fld] = merged
                hit = True
        if not hit:
            return False
        seen = True
        anchors = obj.get("anchors")
        if isinstance(anchors, dict):
            anchors.pop(old_id, None)
            for new in new_ids:
                anchors.pop(new, None)
        if old is not None:
            obj["version"] = max(case_version(obj), case_version(old) + 1)
        add_anchors(obj, kb)
        return True

    new_text, _ = _rewrite(text, change)
    if not seen:
        raise DatasetError(
            f"case '{case_id}' in {path.name} labels no chunk '{old_id}' — give the id as "
            "`rag datasets check` prints it"
        )
    note = f"{case_id}: label {old_id} re-pointed to {', '.join(new_ids)} (its passage changed)"
    if released:
        target = new_version(suite, root=folder, note=note)
    else:
        target = path
        parsed = parse_file_name(path.name)
        version = f"{parsed[1]}.{parsed[2]}" if parsed else "0.0"
        append_note(folder, suite, version, note)
    target.write_text(new_text, encoding="utf-8")
    return target, suite
