"""The trace's retrieved rows (Pipeline.answer step 3), validated in one call."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.generation.pipeline.generator import _retrieved
from app.generation.pipeline.rewrite import RewriteResult
from app.generation.pipeline.trace import RetrievedChunk
from app.paths import kb_dir
from app.retrieval.index import Hit
from app.retrieval.kb import load_kb


def _old_row(hit: Hit, rw: RewriteResult) -> RetrievedChunk:  # the former per-row model
    which = "original" if rw.changed and hit.query == rw.original else "rewritten"
    return RetrievedChunk(
        chunk_id=hit.chunk_id,
        title=hit.chunk.title,
        score=hit.score,
        raw_score=hit.raw_score,
        query=which,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("changed", [True, False])
def test_rows_equal_one_model_per_hit(changed: bool) -> None:
    chunks = load_kb(kb_dir()).chunks
    rw = RewriteResult(
        original="它能结转吗？",
        rewritten="年假能结转吗？" if changed else "它能结转吗？",
        strategy="standalone",
        triggered=changed,
    )
    assert rw.changed is changed
    hits = [
        Hit(chunks[0], 0.9, 3.5, rw.rewritten),
        Hit(chunks[1], 0.5, 1.0, rw.original),
        Hit(chunks[2], 1, 2, rw.original),  # ints: validated into floats, as before
        Hit(chunks[3], 0.25, 0.75, "another query"),
    ]
    rows = _retrieved(hits, rw)
    old = [_old_row(h, rw) for h in hits]
    assert rows == old
    assert [r.model_dump_json() for r in rows] == [r.model_dump_json() for r in old]
    assert [r.model_fields_set for r in rows] == [r.model_fields_set for r in old]
    assert [r.query for r in rows] == (
        ["rewritten", "original", "original", "rewritten"] if changed else ["rewritten"] * 4
    )
    assert type(rows[2].score) is float and rows[2].model_dump_json().count("1.0") == 1
    assert _retrieved([], rw) == []


def test_a_bad_row_is_still_refused() -> None:
    chunk = load_kb(kb_dir()).chunks[0]
    rw = RewriteResult(original="q", rewritten="q", strategy="off", triggered=False)
    with pytest.raises(ValidationError):
        _retrieved([Hit(chunk, "high", 1.0, "q")], rw)  # type: ignore[arg-type]
