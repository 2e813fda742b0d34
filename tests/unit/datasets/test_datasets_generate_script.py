"""scripts/generate_eval_cases.py: refuses without a provider, writes a review file, marks 30 %."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _datasets_support import DATASETS, ROOT

from app.llm.types import ChatRequest, Completion


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_eval_cases", ROOT / "scripts" / "generate_eval_cases.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_eval_cases"] = module
    spec.loader.exec_module(module)
    return module


class FakeEngine:
    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def generate(
        self, provider: str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        self.requests.append(request)
        n = len(self.requests)
        if n == 3:
            return Completion(text="sorry, no JSON", provider="fake", model=request.model)
        items = [
            {"question": f"问题 {n}-{k}？", "golden_answer": f"答案 {n}-{k}", "difficulty": "easy"}
            for k in range(3)
        ]
        return Completion(
            text="```json\n" + json.dumps(items, ensure_ascii=False) + "\n```",
            provider="fake",
            model=request.model,
        )


def test_refuses_without_provider(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_script().main([]) == 2
    assert "--provider is required" in capsys.readouterr().err


def test_writes_review_file_with_30_percent_sample(tmp_path: Path) -> None:
    script = load_script()
    out = tmp_path / "review.jsonl"
    engine = FakeEngine()
    assert (
        script.main(
            ["--provider", "openai:gpt-4o-mini", "--limit", "10", "--out", str(out)], engine=engine
        )
        == 0
    )
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 27  # 10 chunks x 3, one chunk's answer did not parse
    assert sum(r["needs_review"] for r in rows) == 9  # ceil(30 %)
    assert all(
        r["review_status"] == "pending" and r["annotator"] == "llm:openai:gpt-4o-mini" for r in rows
    )
    assert "文档片段" in engine.requests[0].messages[0].content
    assert all(
        r["acl"] in (["public"], ["employee"]) for r in rows
    )  # no restricted chunks by default
    # deterministic: the same seed marks the same candidates
    out2 = tmp_path / "review2.jsonl"
    script.main(
        ["--provider", "openai:gpt-4o-mini", "--limit", "10", "--out", str(out2)],
        engine=FakeEngine(),
    )
    marked = [json.loads(x)["needs_review"] for x in out2.read_text(encoding="utf-8").splitlines()]
    assert marked == [r["needs_review"] for r in rows]


def test_never_writes_into_a_suite() -> None:
    with pytest.raises(SystemExit, match="never into"):
        load_script().main(
            ["--provider", "openai:gpt-4o-mini", "--out", str(DATASETS / "gen_v1.0.jsonl")],
            engine=FakeEngine(),
        )
