"""The pipeline serves a rollout's arms by user and every answer-log line names its arm and
version (real registry copy with a candidate v3, real Engine with offline:extractive)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.generation.registry import build_registry, default_root
from app.generation.registry.authoring import lock, new_version, start_rollout
from app.generation.registry.releases import parse_since
from app.llm.engine import Engine, EngineConfig
from app.ops.logs import read_answer_log

PID = "system/kb_qa"


@pytest.fixture
def lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RAG_PROMPT_PIN", raising=False)
    root = tmp_path / "prompts"
    shutil.copytree(default_root(), root, ignore=shutil.ignore_patterns("__pycache__"))
    path = new_version(build_registry(root), PID, author="tester")
    path.write_text(
        path.read_text(encoding="utf-8").replace("TODO 描述本次变更", "拒答更明确"),
        encoding="utf-8",
    )
    lock(build_registry(root), ("system/kb_qa_v3",))
    (root / "releases.toml").write_text(
        (root / "releases.toml").read_text(encoding="utf-8")
        + '\n[rollout]\nstages = [{ name = "half", percent = 50, min_minutes = 0 },'
        ' { name = "full", percent = 100, min_minutes = 0 }]\n',
        encoding="utf-8",
    )
    start_rollout(build_registry(root), PID, 3, parse_since("2026-12-05T00:00:00Z"))
    return root


async def test_every_answer_log_line_names_its_arm(
    lib: Path, kb_path: Path, tmp_path: Path
) -> None:
    reg = build_registry(lib)
    assert reg.check() == []
    engine = Engine(EngineConfig(cache=False))
    try:
        pipe = Pipeline(
            PipelineConfig(model="offline:extractive", kb_path=kb_path, log_answers=True),
            engine,
            registry=reg,
        )
        users = [f"user-{n}" for n in range(12)]
        for user in [*users, *users[:4]]:  # four users ask twice
            await pipe.answer("年假可以结转吗", [], ["public"], user=user)
        anonymous = await pipe.answer("年假可以结转吗", [], ["public"])
    finally:
        await engine.aclose()
    assert anonymous.trace.arm == "control" and anonymous.trace.prompt_version == "system/kb_qa_v2"
    log = read_answer_log(tmp_path / "logs" / "answers.jsonl")
    assert len(log.answers) == 17
    by_user: dict[str | None, set[str]] = {}
    for rec in log.answers:
        arm = rec.arm_of(PID)
        assert arm is not None, rec  # every line names the arm of the prompt under rollout
        assert rec.arm == arm.arm and arm.version == rec.prompt_version  # and its version
        expected = reg.choose(PID, rec.user)
        assert (arm.arm, arm.version) == (expected[1], expected[0].qualified)
        by_user.setdefault(rec.user, set()).add(arm.arm)
    assert all(len(arms) == 1 for arms in by_user.values())  # the same user, the same arm
    assert {a for arms in by_user.values() for a in arms} == {"control", "candidate"}
    raw = (tmp_path / "logs" / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    assert all('"arm": ' in line and '"user": ' in line for line in raw)
    assert json.loads(raw[-1])["user"] is None
