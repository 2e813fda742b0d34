"""The answer log carries what replay and mining need; ``rag feedback`` appends ratings."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.ops.logs import read_answer_log


def test_a_logged_answer_carries_its_text_history_and_cited_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path))
    from app.generation.pipeline.config import PipelineConfig
    from app.generation.pipeline.generator import Pipeline
    from app.llm.engine import Engine, EngineConfig

    history = [
        {"role": "user", "content": "年假一年能休几天？"},
        {"role": "assistant", "content": "工作满 1 年不满 10 年的员工每年 5 天年假。"},
    ]

    async def run() -> object:
        engine = Engine(EngineConfig(cache=False))
        try:
            pipe = Pipeline(PipelineConfig(model="offline:extractive"), engine)
            return await pipe.answer("那要提前几天申请？", history, ["employee"])
        finally:
            await engine.aclose()

    ans = asyncio.run(run())
    log = read_answer_log(tmp_path / "answers.jsonl")
    rec = log.answers[-1]
    assert rec.answer == ans.text  # type: ignore[attr-defined]
    assert [t.model_dump() for t in rec.history or []] == history
    assert rec.cited == [c.chunk_id for c in ans.citations]  # type: ignore[attr-defined]
    assert rec.retrieved_count == len(ans.trace.retrieved)  # type: ignore[attr-defined]


def test_rag_feedback_appends_a_rating_the_reader_accepts(tmp_path: Path) -> None:
    env = {**os.environ, "RAG_LOG_DIR": str(tmp_path)}
    (tmp_path / "answers.jsonl").write_text(
        json.dumps(
            {
                "event": "answer",
                "trace_id": "t1",
                "ts": "2026-11-30T00:00:00Z",
                "model": "offline:extractive",
                "mode": "strict",
                "question": "q",
            }
        )
        + "\n",
        "utf-8",
    )
    ok = subprocess.run(
        [sys.executable, "-m", "app", "feedback", "t1", "--user", "u-1", "--down"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    log = read_answer_log(tmp_path / "answers.jsonl")
    assert [(f.trace_id, f.user, f.rating) for f in log.feedback] == [("t1", "u-1", "down")]
    bad = subprocess.run(
        [sys.executable, "-m", "app", "feedback", "t1", "--user", "u-1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "--up" in bad.stderr and "Traceback" not in bad.stderr


def test_the_writer_writes_only_records_its_reader_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one struct for writer and reader (app.generation.pipeline.answer_log): an empty user
    # used to be appended and then made the whole log unreadable (`user` min length 1)
    from app.generation.pipeline.answer_log import AnswerRecord, record_feedback
    from app.ops import logs

    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="user"):
        record_feedback("t1", "", "down")
    with pytest.raises(ValueError, match="trace_id"):
        record_feedback("", "u1", "down")
    assert not (tmp_path / "answers.jsonl").exists()
    assert logs.AnswerRecord is AnswerRecord  # the reader reads the writer's struct
    # a line from before the log carried `refused` gets the rule of its time
    old = AnswerRecord.model_validate(
        {
            "trace_id": "t",
            "ts": "2026-11-30T00:00:00Z",
            "model": "m",
            "mode": "no_hits",
            "question": "q",
        }
    )
    assert old.refused
