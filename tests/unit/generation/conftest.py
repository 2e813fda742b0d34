"""Fixtures for the generation tests: a tiny KB of our own and a fake engine that counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.llm.spec import ModelRef
from app.llm.types import ChatRequest, Completion, Usage

DOCS = {
    "pub/leave.md": (
        "年假制度",
        "public",
        "员工年假为每年五天。未休完的年假可以结转到次年三月三十一日。",
    ),
    "pub/wifi.md": ("办公网络", "public", "访客网络名称为 Guest，密码每周一更新，可在前台索取。"),
    "emp/travel.md": (
        "差旅费报销制度",
        "employee",
        "出差住宿标准为一线城市每晚六百元，其他城市每晚四百元。",
    ),
    "hr/salary.md": (
        "薪酬保密制度",
        "hr",
        "薪酬等级表 HRSECRET-01：经理级月薪五万元，仅人力资源部可查阅。",
    ),
    "exec/board.md": (
        "董事会战略规划",
        "exec",
        "董事会决议 EXECSECRET-02：明年收购两家公司，预算十亿元。",
    ),
    "fin/budget.md": (
        "年度预算",
        "finance",
        "财务预算 FINSECRET-03：研发预算三亿元，市场预算一亿元。",
    ),
}


def write_kb(root: Path) -> Path:
    for rel, (title, acl, body) in DOCS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: {title}\nacl: [{acl}]\n---\n# {title}\n\n{body}\n", "utf-8")
    return root


@pytest.fixture
def kb_path(tmp_path: Path) -> Path:
    return write_kb(tmp_path / "kb")


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))


class FakeEngine:
    """Implements ``generate(provider, request, sample_index)``; records every call.

    ``answer(request) -> str`` decides the text; by default the rewrite purpose returns
    ``rewrites[question]`` as JSON and everything else echoes the first document with [1].
    """

    def __init__(self, answer: Callable[[ChatRequest], str] | None = None) -> None:
        self.calls: list[tuple[ModelRef, ChatRequest]] = []
        self.rewrites: dict[str, str] = {}
        self._answer = answer

    def by_purpose(self, purpose: str) -> list[ChatRequest]:
        return [r for _, r in self.calls if r.purpose == purpose]

    async def generate(
        self, provider: ModelRef, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        self.calls.append((provider, request))
        if self._answer is not None:
            text = self._answer(request)
        elif request.purpose == "rewrite":
            q = request.variables.get("question", request.variables.get("input", ""))
            text = json.dumps(
                {"original": q, "rewritten": self.rewrites.get(q, q)}, ensure_ascii=False
            )
        elif request.purpose == "summary":
            text = f"摘要({len(request.variables['new_lines'])})\n\n多余的第二段"
        else:
            docs = json.loads(request.metadata.get("documents", "[]"))
            text = f"{docs[0]} [1]" if docs else "无法回答"
        return Completion(
            text=text,
            provider="fake",
            model=request.model,
            usage=Usage(input_tokens=10, output_tokens=5),
            cost_usd=0.001,
        )


@pytest.fixture
def fake_engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def make_engine() -> type[FakeEngine]:
    """The FakeEngine class, for tests that pass their own ``answer`` function."""
    return FakeEngine
