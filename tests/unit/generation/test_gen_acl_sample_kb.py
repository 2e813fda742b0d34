"""ACL red line over the whole sample KB: a ``public`` reader never sees a restricted chunk
— not in the answer, not in the trace, not in the log — whatever they ask, including the
restricted documents' own titles, headings and opening words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.llm.engine import Engine, EngineConfig
from app.paths import kb_dir
from app.retrieval.kb import can_read, load_kb

_SENT = re.compile(r"[^。！？!?\n]{8,}")


@pytest.mark.skipif(not kb_dir().is_dir(), reason="sample KB not present")
async def test_public_reader_never_sees_restricted_chunks(tmp_path: Path) -> None:
    kb = load_kb(kb_dir())
    readable = [c for c in kb.chunks if can_read(["public"], c.acl)]
    restricted = [c for c in kb.chunks if not can_read(["public"], c.acl)]
    assert restricted, "the sample KB should hold non-public documents"
    readable_text = "\n".join(c.text for c in readable)
    secret_sentences = {
        s.strip()
        for c in restricted
        for s in _SENT.findall(c.text.split("\n", 1)[-1])
        if s.strip() not in readable_text
    }
    restricted_ids = {c.chunk_id for c in restricted}
    queries = sorted(
        {d.title for d in kb.documents if not can_read(["public"], d.acl)}
        | {c.heading for c in restricted if c.heading}
        | {c.text.split("\n\n", 1)[-1][:24] for c in restricted}
        | {"年假有几天", "差旅费报销标准", "工资怎么算", "VPN 账号密码", "高管薪酬", "董事会决议"}
    )
    assert len(queries) >= 100
    engine = Engine(EngineConfig(cache=False))
    pipe = Pipeline(PipelineConfig(injection_policy="alert"), engine, kb=kb)
    try:
        for query in queries:
            answer = await pipe.answer(query, [], ["public"])
            dumped = json.dumps(answer.model_dump(mode="json"), ensure_ascii=False)
            leaked_ids = [cid for cid in restricted_ids if cid in dumped]
            assert not leaked_ids, (query, leaked_ids)
            echo = answer.model_dump(mode="json")
            own = [echo["trace"].pop(key) for key in ("question", "rewritten_query")]
            for message in echo["trace"]["sent"]:  # the prompt as sent quotes them too
                for words in own:  # (the documents in it are still searched)
                    message["content"] = message["content"].replace(words, "")
            without_query = json.dumps(echo, ensure_ascii=False)
            leaked = [s for s in secret_sentences if s in answer.text or s in without_query]
            assert not leaked, (query, leaked[:2])
    finally:
        await engine.aclose()
    log = (tmp_path / "logs" / "answers.jsonl").read_text("utf-8")
    assert len(log.splitlines()) == len(queries)
    assert not any(cid in log for cid in restricted_ids)
