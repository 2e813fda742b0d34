"""Rendering: lookup, variables, model gating, chat formats, to_request, pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConfigError, PromptError
from app.generation.registry import build_registry, default_root, load_registry, render
from app.generation.registry.chat_formats import format_for
from app.llm.providers.families import parse_model
from app.llm.types import ChatRequest, Message
from tests.support.registry import wire

VARS = {"question": "年假有几天？", "context": "[1] 入职满一年 5 天。"}


@pytest.fixture
def reg():  # type: ignore[no-untyped-def]
    return build_registry(default_root())


def test_get_active_and_exact(reg) -> None:  # type: ignore[no-untyped-def]
    spec = reg.get("system/kb_qa")
    assert (spec.prompt_id, spec.qualified, spec.category, spec.slug, spec.version) == (
        "system/kb_qa",
        "system/kb_qa_v2",
        "system",
        "kb_qa",
        2,
    )
    assert reg.get("system/kb_qa_v1").version == 1
    assert spec.variables == frozenset({"company_name", "context", "question"})
    assert spec.rejection_trigger_keywords == ("无法确定",)
    assert spec.canary is not None and spec.canary in (spec.system_prompt or "")
    assert spec.content_hash.startswith("sha256:") and len(spec.content_hash) == 71
    assert spec.header.purpose and "反幻觉" in spec.header.purpose
    assert [c.version for c in spec.header.changes] == [2, 1]


def test_unknown_prompt_and_version(reg) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PromptError, match="unknown prompt 'system/nope'"):
        reg.get("system/nope")
    with pytest.raises(PromptError, match=r"system/kb_qa_v9.*system/kb_qa_v1"):
        reg.get("system/kb_qa_v9")


def test_pin_overrides_active(reg, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RAG_PROMPT_PIN", "judge/relevance=v1, system/kb_qa=v1")
    assert reg.get("system/kb_qa").qualified == "system/kb_qa_v1"
    monkeypatch.setenv("RAG_PROMPT_PIN", "system/kb_qa=v7")
    with pytest.raises(PromptError, match="v7"):
        reg.get("system/kb_qa")
    monkeypatch.setenv("RAG_PROMPT_PIN", "system/kb_qa")
    with pytest.raises(ConfigError, match="RAG_PROMPT_PIN"):
        reg.get("system/kb_qa")


def test_render_anthropic_cacheable_system_and_request(reg) -> None:  # type: ignore[no-untyped-def]
    rp = reg.render("system/kb_qa", model="anthropic:claude-sonnet-4-6", variables=VARS)
    assert rp.chat_format == "anthropic"
    assert rp.qualified_version == "system/kb_qa_v2"
    assert rp.model == "claude-sonnet-4-6"
    assert rp.system is not None and "示例科技" in rp.system  # DEFAULTS filled company_name
    assert wire(rp)["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert rp.messages == (Message("user", rp.messages[0].content),)
    assert "<用户提问>\n年假有几天？\n</用户提问>" in rp.messages[0].content
    req = rp.to_request(temperature=0.1, max_tokens=512, metadata={"trace_id": "t1"})
    assert isinstance(req, ChatRequest)
    assert req.prompt_version == "system/kb_qa_v2"
    assert req.prompt_hash == reg.get("system/kb_qa_v2").content_hash
    assert req.chat_format == "anthropic"
    assert req.variables["question"] == "年假有几天？"
    assert req.metadata["rejection_answer"] == reg.get("system/kb_qa_v2").rejection_answer
    assert req.metadata["trace_id"] == "t1"
    assert (req.temperature, req.max_tokens, req.purpose) == (0.1, 512, "generation")


def test_render_openai_system_message(reg) -> None:  # type: ignore[no-untyped-def]
    rp = reg.render("system/kb_qa_v1", model="openai:gpt-4o-mini", variables=VARS)
    assert rp.chat_format == "openai"
    msgs = wire(rp)["messages"]
    assert msgs[0]["role"] == "system" and msgs[0]["content"] == rp.system
    assert msgs[1] == {"role": "user", "content": rp.messages[-1].content}
    assert rp.prompt_text is None


def test_offline_accepted_everywhere_openai_format(reg) -> None:  # type: ignore[no-untyped-def]
    for spec in reg.specs():
        assert spec.applicable_models  # offline is not listed, yet accepted
    rp = reg.render(
        "judge/faithfulness",
        model="offline:reference-judge",
        variables={"context": "c", "question": "q", "candidate": "a"},
    )
    assert rp.chat_format == "openai"
    req = rp.to_request()
    assert req.purpose == "judge" and req.response_format == "json"
    assert "rejection_answer" not in req.metadata


def test_model_outside_applicable_models(reg) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PromptError) as exc:
        reg.render("system/kb_strict", model="gpt-4o", variables=VARS)
    msg = str(exc.value)
    assert "system/kb_strict_v1" in msg and "'gpt-4o'" in msg and "claude-opus-4-7" in msg


def test_fnmatch_patterns(reg) -> None:  # type: ignore[no-untyped-def]
    rp = reg.render("system/kb_qa", model="qwen2-7b-instruct", variables=VARS)
    assert rp.chat_format == "openai"
    with pytest.raises(PromptError):
        reg.render("system/kb_qa", model="qwen-7b", variables=VARS)


def test_missing_and_unexpected_variables(reg) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PromptError, match=r"missing variable\(s\) \['context'\].*'question'"):
        reg.render("system/kb_qa", model="claude-opus-4-7", variables={"question": "q"})
    with pytest.raises(PromptError, match=r"unexpected variable\(s\) \['foo'\]"):
        reg.render("system/kb_qa", model="claude-opus-4-7", variables={**VARS, "foo": "x"})


def test_literal_braces_survive(reg) -> None:  # type: ignore[no-untyped-def]
    rp = reg.render(
        "judge/faithfulness",
        model="claude-opus-4-7",
        variables={"context": "{x}", "question": "q", "candidate": "a"},
    )
    content = rp.messages[-1].content
    assert '{"score": <1-5>' in content
    assert "<参考资料>\n{x}\n</参考资料>" in content


def test_history_is_prepended_and_must_alternate(reg) -> None:  # type: ignore[no-untyped-def]
    hist = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}]
    rp = reg.render("system/kb_qa", model="claude-opus-4-7", variables=VARS, history=hist)
    assert [m.role for m in rp.messages] == ["user", "assistant", "user"]
    with pytest.raises(PromptError, match="alternate"):
        reg.render("system/kb_qa", model="claude-opus-4-7", variables=VARS, history=hist[:1])


def test_text_format(reg) -> None:  # type: ignore[no-untyped-def]
    rp = reg.render(
        "system/retrieval_qa_zh",
        model="qwen-72b",
        chat_format="text",
        variables={"question": "q", "context": "c", "chat_history": ""},
    )
    assert rp.prompt_text is not None
    assert rp.prompt_text.startswith(rp.system or "x")
    assert rp.prompt_text.endswith("用户: q\nAssistant:")


@pytest.mark.parametrize(
    ("model", "fmt", "mid"),
    [
        ("anthropic:claude-opus-4-7", "anthropic", "claude-opus-4-7"),
        ("claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6"),
        ("openai:gpt-4o", "openai", "gpt-4o"),
        ("o3-mini", "openai", "o3-mini"),
        ("openai:qwen2-7b@http://127.0.0.1:8000/v1", "openai", "qwen2-7b"),
        (
            "openai:meta-llama/Llama-2-13b-chat-hf@http://127.0.0.1:9/v1",
            "llama2",
            "meta-llama/Llama-2-13b-chat-hf",
        ),
        ("llama2-7b-chat", "llama2", "llama2-7b-chat"),
        ("davinci-002", "text", "davinci-002"),
        ("offline:extractive", "openai", "extractive"),
    ],
)
def test_format_table(model: str, fmt: str, mid: str) -> None:
    ref = parse_model(model)
    assert ref.model == mid
    assert format_for(ref) == fmt


def test_load_registry_is_cached_and_module_level_render() -> None:
    assert load_registry() is load_registry()
    rp = render(
        "summary/summarize_en",
        model="llama-2-7b-chat",
        variables={"summary": "s", "new_lines": "n"},
    )
    assert rp.chat_format == "llama2"
    assert rp.prompt_text is not None and rp.prompt_text.startswith("<s>[INST] Progressively")
    assert rp.to_request().purpose == "summary"


def test_loader_never_executes_module(lib: Path) -> None:
    marker = lib / "executed.txt"
    p = lib / "classify" / "intent_v2.py"
    src = (lib / "classify" / "intent_v1.py").read_text(encoding="utf-8")
    p.write_text(src + f"\nopen({str(marker)!r}, 'w').write('x')\n", encoding="utf-8")
    violations = build_registry(lib).check()
    assert not marker.exists()
    assert any(v.code == "P018" and v.file == "classify/intent_v2.py" for v in violations)
