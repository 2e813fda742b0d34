"""``rag shadow``: replay logged questions through a candidate and compare with the log."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.generation.pipeline.trace import Answer, Citation, RewriteTrace, Trace
from app.ops.logs import read_answer_log
from app.ops.shadow import markdown, replay

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "answer_log" / "answers_sample.jsonl"


def _trace(question: str, mode: str, *, tokens: int = 10) -> Trace:
    t = Trace(
        trace_id="new",
        created_at="2026-12-01T00:00:00Z",
        model="fake:m",
        user_acl=["employee"],
        question=question,
        rewritten_query=question,
        rewrite=RewriteTrace(strategy="off", triggered=False),
        mode=mode,  # type: ignore[arg-type]
        prompt_version="system/kb_qa_v9",
    )
    t.tokens.input = tokens
    t.latency_ms = 5.0
    return t


class ScriptedPipeline:
    """Answers by a script keyed on the question; records what it was asked."""

    def __init__(self, script: dict[str, tuple[str, str, list[str]]]) -> None:
        self.script = script
        self.calls: list[tuple[str, list[dict[str, str]], list[str]]] = []

    async def answer(self, question: str, history: Any, acl: Any) -> Answer:
        self.calls.append((question, list(history), list(acl)))
        text, mode, cites = self.script[question]
        return Answer(
            text=text,
            citations=[Citation(n=i + 1, chunk_id=c, title=c) for i, c in enumerate(cites)],
            trace=_trace(question, mode),
        )


def _log(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return path


def _rec(
    tid: str, q: str, answer: str | None, mode: str, cited: list[str], **kw: Any
) -> dict[str, Any]:
    rec = {
        "event": "answer",
        "trace_id": tid,
        "ts": "2026-11-20T08:00:00Z",
        "model": "fake:m",
        "mode": mode,
        "question": q,
        "user_acl": ["employee"],
        "history": [{"role": "user", "content": "之前"}, {"role": "assistant", "content": "好"}],
        "answer": answer,
        "context_chunk_ids": cited,
        "citations": list(range(1, len(cited) + 1)),
        "cited_chunk_ids": cited,
        "tokens": {"input": 40, "output": 10},
        "latency_ms": 100.0,
    }
    rec.update(kw)
    return rec


def test_replay_counts_changed_newly_refused_and_citation_changes(tmp_path: Path) -> None:
    log = read_answer_log(
        _log(
            tmp_path,
            [
                _rec("a", "同", "一样的答案 [1]", "strict", ["k#1"]),
                _rec("b", "变", "旧答案 [1]", "strict", ["k#1"]),
                _rec("c", "拒", "有答案 [1]", "assisted", ["k#2"]),
                _rec("d", "答", "抱歉，无法回答", "refusal", []),
                _rec("e", "旧", None, "strict", ["k#1"]),  # written before the log had answers
            ],
        )
    )
    pipe = ScriptedPipeline(
        {
            "同": ("一样的答案  [1]", "strict", ["k#1"]),  # whitespace only: not a change
            "变": ("新答案 [1]", "strict", ["k#3"]),
            "拒": ("抱歉，无法回答", "refusal", []),
            "答": ("答上了 [1]", "strict", ["k#1"]),
            "旧": ("x [1]", "strict", ["k#1"]),
        }
    )
    report = asyncio.run(replay(log, pipe, candidate={"prompt": "p", "model": "fake:m"}))
    s = report.summary()
    assert (s["replayed"], s["compared"], s["missing_answer_text"]) == (5, 4, 1)
    assert s["changed"] == 3  # 变, 拒, 答
    assert (s["newly_refused"], s["newly_answered"]) == (1, 1)
    assert s["citations_changed"] == 3  # 变 (k#1→k#3), 拒 (k#2→none), 答 (none→k#1)
    assert s["tokens"]["logged"]["mean"] == 50.0 and s["tokens"]["new"]["mean"] == 10.0
    # replayed with the logged ACL and history
    assert pipe.calls[0][1] == [
        {"role": "user", "content": "之前"},
        {"role": "assistant", "content": "好"},
    ]
    assert pipe.calls[0][2] == ["employee"]
    md = markdown(report)
    assert "| answers changed | 3 of 4 |" in md and "carry no answer text" in md


def test_a_failed_replay_call_is_that_item_s_error(tmp_path: Path) -> None:
    from app.errors import ProviderError

    class Failing(ScriptedPipeline):
        async def answer(self, question: str, history: Any, acl: Any) -> Answer:
            raise ProviderError("openai:x: HTTP 500 after 4 attempts")

    log = read_answer_log(_log(tmp_path, [_rec("a", "q", "a", "strict", [])]))
    report = asyncio.run(replay(log, Failing({}), candidate={}))
    assert report.summary()["errors"] == 1
    assert report.items[0].error and "HTTP 500" in report.items[0].error


def test_shadow_cli_on_the_shipped_log_offline(tmp_path: Path) -> None:
    env = {"RAG_LOG_DIR": str(tmp_path / "logs"), "RAG_CACHE_DIR": str(tmp_path / "cache")}
    import os

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "shadow",
            str(SAMPLE),
            "--prompt",
            "system/kb_qa_v1",
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["replayed"] == 16 and out["errors"] == 0
    report = json.loads(Path(out["report"]).read_text("utf-8"))
    assert report["kind"] == "shadow" and report["candidate"]["offline"] is True
    assert {
        i["new_prompt"] for i in report["items"] if i["new_mode"] in ("strict", "assisted")
    } == {"system/kb_qa_v1"}
    assert not (tmp_path / "logs" / "answers.jsonl").exists()  # a replay is not traffic


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.jsonl", "--prompt", "system/kb_qa_v1"], "no such answer log"),
        ([str(SAMPLE), "--prompt", "system/nope"], "nope"),
    ],
)
def test_shadow_cli_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app", "shadow", *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
