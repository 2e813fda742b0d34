"""``rag ask --json`` through the real OpenAI SDK: the scripted answer, a trace with the
prompt version, and exactly one structured answer-log line under ``RAG_LOG_DIR``."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from app.generation.registry import load_registry

QUESTION = "年假可以结转吗？"


def test_ask_json_answer_trace_and_log_line(
    planted_keys: dict[str, str],
    scripted_llm: Any,
    rag: Any,
    kit: SimpleNamespace,
) -> None:
    server = scripted_llm.server
    model = f"openai:gpt-4o-mini@{server.openai_base_url}"
    result = rag("ask", QUESTION, "--acl", "employee", "--model", model, "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)

    # the model's text, verbatim, for this question; one request, with the planted key
    assert answer["text"] == kit.scripted_answer(QUESTION)
    assert server.requests == 1 and scripted_llm.answer_calls == 1
    (received,) = server.received
    assert received.headers.get("authorization") == f"Bearer {planted_keys['OPENAI_API_KEY']}"
    assert received.body["model"] == "gpt-4o-mini"

    trace = answer["trace"]
    active = load_registry().get("system/kb_qa")
    assert trace["prompt_version"] == active.qualified
    assert trace["prompt_hash"] == active.content_hash
    assert trace["model"] == model
    assert trace["question"] == QUESTION and trace["user_acl"] == ["employee"]
    assert trace["tokens"]["llm_calls"] == 1
    assert [c["n"] for c in answer["citations"]] == [1]  # the scripted [1] resolved
    assert answer["citations"][0]["chunk_id"] == trace["context_chunk_ids"][0]

    # the answer log: one JSON line in the whole log folder, for this answer
    lines = [
        line
        for path in kit.files_under([rag.logs])
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["trace_id"] == trace["trace_id"]
    assert record["prompt_version"] == trace["prompt_version"]
    assert record["model"] == model

    hits = kit.scan_for(
        {**planted_keys, "LANGFUSE_SECRET_KEY": kit.langfuse_secret},
        rag.written_dirs(),
        {"stdout": result.stdout, "stderr": result.stderr},
    )
    assert hits == [], hits
