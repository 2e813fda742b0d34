"""Every fixture of every prompt, rendered for every applicable model and chat format, keeps
the structural contract (seed 004 §3/§4.2: the fixtures are the prompts' unit tests).

No LLM is called: the checks are on the request we would send.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.generation.registry import PromptSpec, build_registry, default_root
from app.generation.registry.chat_formats import FORMATS
from app.generation.registry.loader import fixture_variables
from app.generation.registry.render import RenderedPrompt, render_spec
from app.llm.providers.families import parse_model
from tests.support.registry import wire

REGISTRY = build_registry(default_root())
HISTORY = (
    {"role": "user", "content": "上一个问题"},
    {"role": "assistant", "content": "上一个回答"},
)


def concrete(pattern: str) -> str:
    """A model id matching an APPLICABLE_MODELS entry (fnmatch ``*`` matches empty)."""
    return pattern.replace("*", "").replace("?", "x")


def cases() -> list[Any]:
    out = []
    for spec in REGISTRY.specs():
        models = [concrete(m) for m in spec.applicable_models] + ["offline:extractive"]
        for i, _fixture in enumerate(spec.test_fixtures):
            for model in models:
                out.append(
                    pytest.param(
                        spec.qualified, i, model, "auto", id=f"{spec.qualified}-{i}-{model}"
                    )
                )
            for fmt in FORMATS:
                out.append(
                    pytest.param(
                        spec.qualified, i, models[0], fmt, id=f"{spec.qualified}-{i}-{fmt}"
                    )
                )
    return out


def _texts(rp: RenderedPrompt) -> str:
    return (rp.system or "") + "".join(m.content for m in rp.messages)


def _check_structure(
    spec: PromptSpec, rp: RenderedPrompt, values: dict[str, str], turns: int
) -> None:
    # every placeholder substituted (fixture values themselves hold no braces)
    assert not any("{" in v or "}" in v for v in values.values())
    for name in spec.variables:
        assert "{" + name + "}" not in _texts(rp)
    # values land in the message whose template holds their placeholder
    last_user = rp.messages[-1]
    assert last_user.role == "user"
    for name, value in values.items():
        if not value.strip():
            continue
        if "{" + name + "}" in spec.user_template:
            assert value in last_user.content, name
        elif spec.system_prompt and "{" + name + "}" in spec.system_prompt:
            assert rp.system is not None and value in rp.system, name
    # the system prompt once, in the place the format puts it
    if rp.provider.offline:  # an in-process provider receives the request itself
        assert wire(rp)["system"] == rp.system
        assert [m[0] for m in wire(rp)["messages"]] == [m.role for m in rp.messages]
        assert wire(rp)["variables"] == dict(rp.variables)
    elif rp.chat_format == "openai":
        roles = [m["role"] for m in wire(rp)["messages"]]
        assert roles.count("system") == (1 if rp.system is not None else 0)
        if rp.system is not None:
            assert roles[0] == "system"
    elif rp.chat_format == "anthropic":
        assert all(m["role"] != "system" for m in wire(rp)["messages"])
        if rp.system is not None:
            assert wire(rp)["system"][0]["text"] == rp.system
            assert wire(rp)["system"][0]["cache_control"] == {"type": "ephemeral"}
    elif rp.chat_format == "llama2":
        text = rp.prompt_text
        assert text is not None and text.startswith("<s>[INST] ")
        assert (
            text.count("<<SYS>>") == text.count("<</SYS>>") == (1 if rp.system is not None else 0)
        )
        assert text.count("[INST]") == text.count("[/INST]") == turns
        assert text.count("<s>") == turns
        assert text.count("</s>") == turns - 1  # one after every answer
        assert text.endswith(" [/INST]")
    else:
        assert rp.prompt_text is not None
        if rp.system:
            assert rp.prompt_text.count(rp.system) == 1
    if spec.canary:
        assert rp.system is not None and rp.system.count(spec.canary) == 1
        assert spec.canary not in last_user.content


@pytest.mark.parametrize(("qualified", "index", "model", "fmt"), cases())
def test_fixture_renders(qualified: str, index: int, model: str, fmt: str) -> None:
    spec = REGISTRY.get(qualified)
    fixture = spec.test_fixtures[index]
    values = {k: str(v) for k, v in fixture_variables(spec, fixture).items()}
    ref = parse_model(model)
    rp = render_spec(spec, model=ref, variables=values, chat_format=fmt)
    _check_structure(spec, rp, values, turns=1)
    rp = render_spec(spec, model=ref, variables=values, history=HISTORY, chat_format=fmt)
    _check_structure(spec, rp, values, turns=2)
    assert rp.messages[0].content == "上一个问题"
    req = rp.to_request()
    assert req.prompt_version == spec.qualified and req.prompt_hash == spec.content_hash
    if spec.rejection_answer:
        assert req.metadata["rejection_answer"] == spec.rejection_answer


def test_every_prompt_has_three_to_five_fixtures_with_phrases() -> None:
    specs = REGISTRY.specs()
    # every prompt module on disk is loaded (whatever their number)
    on_disk = {f"{p.parent.name}/{p.stem}" for p in default_root().glob("*/*_v*.py") if p.is_file()}
    assert {s.qualified for s in specs} == on_disk and on_disk
    for spec in specs:
        assert 3 <= len(spec.test_fixtures) <= 5, spec.qualified
        for fx in spec.test_fixtures:
            assert fx["expected_phrases"], spec.qualified
