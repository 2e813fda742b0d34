"""``rag ask``: prints answer, citations and trace; --json; errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_ask_prints_answer_citations_trace(
    kb_path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _run(["ask", "年假可以结转吗？", "--kb", str(kb_path)], capsys)
    assert code == 0
    assert "[1]" in out.splitlines()[0]
    assert "Citations:\n  [1] kb:pub/leave.md#0  年假制度" in out
    assert "prompt     system/kb_qa_v2" in out and "mode       strict" in out
    line = json.loads((tmp_path / "logs" / "answers.jsonl").read_text("utf-8").splitlines()[-1])
    assert line["prompt_version"] == "system/kb_qa_v2" and line["model"] == "offline:extractive"


def test_ask_json_with_history_and_acl(
    kb_path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    history = tmp_path / "h.jsonl"
    history.write_text(
        '{"role": "user", "content": "差旅费报销制度是什么？"}\n'
        '{"role": "assistant", "content": "规定了出差住宿标准。"}\n',
        "utf-8",
    )
    argv = ["ask", "那住宿呢？", "--kb", str(kb_path), "--history", str(history)]
    code, out, _ = _run([*argv, "--acl", "employee", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["trace"]["rewritten_query"] == "差旅费报销的住宿是什么？"
    assert data["trace"]["user_acl"] == ["employee"]
    assert "kb:emp/travel.md#0" in data["trace"]["context_chunk_ids"]
    code, out, _ = _run([*argv, "--json"], capsys)  # public: the employee doc is invisible
    assert "emp/travel" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ask", "年假", "--acl", "boss"], "unknown group"),
        (["ask", "年假", "--history", "/nonexistent/h.json"], "not found"),
        (["ask", "  "], "the question is empty"),
        (["ask", "年假", "--kb", "/nonexistent/kb"], "knowledge-base folder not found"),
        (["ask", "年假", "--prompt", "system/nope"], "unknown prompt"),
    ],
)
def test_ask_user_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2 and message in err


def test_ask_bad_history_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "robot", "content": "x"}]', "utf-8")
    code, _, err = _run(["ask", "年假", "--history", str(bad)], capsys)
    assert code == 2 and f"--history {bad}: history item 1 must be" in err


def test_ask_trace_names_a_prompt_over_max_tokens_instead_of_a_negative_budget(
    kb_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    question = ("年假出差报销住宿标准" * 400)[:4000]
    argv = ["ask", question, "--kb", str(kb_path), "--retriever", "bm25"]
    code, out, _ = _run([*argv, "--json"], capsys)
    assert code == 0
    memory = json.loads(out)["trace"]["memory"]
    over = memory["prompt_tokens"] - memory["max_tokens"]
    assert over > 0  # the question alone is over the budget
    code, out, _ = _run(argv, capsys)
    line = next(x for x in out.splitlines() if x.strip().startswith("memory"))
    assert f"the prompt alone is {memory['prompt_tokens']} tokens" in line
    assert f"over max_tokens={memory['max_tokens']} by {over} " in line
    assert "/-" not in line
