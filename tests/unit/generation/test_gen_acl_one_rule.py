"""The ACL group rule has one home (app.retrieval.kb: ``Group``, ``ACL_GROUPS``,
``reader_groups``, ``held_groups``): the knowledge base, the case model, ``rag ask``, the
pipeline, the retriever and the acl_leak metric read the same groups the same way.

Pinned disagreement (failed before the homes were merged): the knowledge base, the case
model and ``rag ask --acl`` refuse an unknown group, but ``Pipeline.answer`` took one
silently (``["HR"]`` read as a group nobody holds: an HR reader got public answers and no
error); the group list was declared three times.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, get_args

import pytest

from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.retrieval import kb

if TYPE_CHECKING:
    from conftest import FakeEngine


def test_the_group_list_has_one_home() -> None:
    from app.eval.datasets import case

    assert get_args(kb.Group) == kb.ACL_GROUPS
    assert case.ACL_GROUPS is kb.ACL_GROUPS
    assert case.Group is kb.Group
    assert kb.held_groups(["hr"]) == frozenset({"hr", "public"})
    assert kb.reader_groups("employee") == ("employee",)
    assert kb.reader_groups(["hr", "employee", "hr"]) == ("employee", "hr")


async def test_the_pipeline_refuses_an_unknown_group_as_the_case_model_does(
    kb_path: Path, fake_engine: FakeEngine
) -> None:
    from pydantic import ValidationError

    from app.eval.datasets.case import Case

    with pytest.raises(ValidationError, match=r"acl\.0\n.*'public', 'employee'"):
        Case.model_validate({"id": "c1", "question": "q", "acl": ["HR"], "expected_refusal": False})
    pipe = Pipeline(
        PipelineConfig(model="anthropic:claude-sonnet-4-6", kb_path=kb_path, retriever="bm25"),
        fake_engine,  # type: ignore[arg-type]
    )
    with pytest.raises(ValueError, match=r"HR.*public, employee, hr, finance, exec"):
        await pipe.answer("薪酬等级表是什么", [], ["HR"])
    assert not fake_engine.calls  # refused before any model call
    answer = await pipe.answer("薪酬等级表是什么", [], ["hr"])
    assert answer.trace.user_acl == ["hr"]


def test_an_answer_log_line_with_an_unknown_group_is_an_input_error(tmp_path: Path) -> None:
    import json

    from app.errors import UserError
    from app.ops.logs import read_answer_log

    line = {"event": "answer", "trace_id": "t", "ts": "2026-11-30T00:00:00Z", "model": "m"}
    log = tmp_path / "answers.jsonl"
    log.write_text(
        json.dumps({**line, "mode": "strict", "question": "q", "user_acl": ["HR"]}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(UserError, match=r"answers\.jsonl:1: answer record, field `user_acl\.0`"):
        read_answer_log(log)
