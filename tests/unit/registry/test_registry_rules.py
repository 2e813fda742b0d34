"""Each loader rule: a broken copy of a real module yields exactly that code, with file and
line, exit 1, while every other module is still checked."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from registry_helpers import edit, line_of

from app.generation.registry import build_registry, default_root


def copy_as_next(lib: Path, qualified: str) -> Path:
    """Copy <cat>/<slug>_vN.py to _v(N+1).py with VERSION and header version bumped (an
    unreleased draft, so release/lock rules stay quiet)."""
    cat, name = qualified.split("/")
    slug, n = re.fullmatch(r"(.+)_v(\d+)", name).groups()  # type: ignore[union-attr]
    src = lib / cat / f"{name}.py"
    nxt = int(n) + 1
    while (lib / cat / f"{slug}_v{nxt}.py").exists():
        nxt += 1
    dst = lib / cat / f"{slug}_v{nxt}.py"
    text = src.read_text(encoding="utf-8")
    text = text.replace(f'VERSION = "{name}"', f'VERSION = "{slug}_v{nxt}"')
    text = re.sub(r"^(版本|Version): v\d+$", rf"\1: v{nxt}", text, count=1, flags=re.M)
    dst.write_text(text, encoding="utf-8")
    return dst


# Each case: (expected code, mutation returning (file relative to root, expected line or None))
Mutation = Callable[[Path], tuple[str, int | None]]


def _version_mismatch(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_qa_v2")
    edit(p, 'VERSION = "kb_qa_v3"', 'VERSION = "kb_qa_v2"')
    return "system/kb_qa_v3.py", line_of(p, "VERSION =")


def _header_field_missing(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_qa_v1")
    edit(p, "用途: 企业知识库主回答 system prompt：仅依据参考资料作答的朴素版本\n", "")
    return "system/kb_qa_v3.py", 1  # missing field: reported at the docstring's first line


def _header_missing(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "classify/intent_v1")
    text = p.read_text(encoding="utf-8")
    p.write_text(text[text.index('VERSION = "') :], encoding="utf-8")
    return "classify/intent_v2.py", 1


def _header_version_mismatch(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "summary/summarize_en_v1")
    edit(p, "Version: v2", "Version: v7")
    return "summary/summarize_en_v2.py", line_of(p, "Version: v7")


def _header_models_mismatch(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_strict_v1")
    edit(p, "适用模型: claude-sonnet-4-6, claude-opus-4-7", "适用模型: claude-sonnet-4-6")
    return "system/kb_strict_v2.py", line_of(p, "适用模型:")


def _models_empty(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "judge/relevance_v1")
    edit(
        p,
        'APPLICABLE_MODELS = ["claude-opus-4-7", "claude-sonnet-4-6", "gpt-4o*"]',
        "APPLICABLE_MODELS = []",
    )
    return "judge/relevance_v2.py", line_of(p, "APPLICABLE_MODELS =")


def _two_fixtures(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_strict_v1")
    text = p.read_text(encoding="utf-8")
    start = text.index('    {\n        "question": "明年利率会下调吗？"')
    end = text.index("    },\n", start) + len("    },\n")
    p.write_text(text[:start] + text[end:], encoding="utf-8")
    return "system/kb_strict_v2.py", line_of(p, "TEST_FIXTURES =")


def _six_fixtures(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_qa_v2")
    extra = (
        '    {"question": "q5", "context_excerpt": "[1] c", "expected_phrases": ["c"]},\n'
        '    {"question": "q6", "context_excerpt": "[1] c", "expected_phrases": ["c"]},\n'
    )
    edit(p, "TEST_FIXTURES = [\n", "TEST_FIXTURES = [\n" + extra)
    return "system/kb_qa_v3.py", line_of(p, "TEST_FIXTURES =")


def _fixture_shape(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "summary/summarize_zh_v1")
    edit(p, '"expected_phrases": ["600"],', '"expected_phrases": [],')
    return "summary/summarize_zh_v2.py", line_of(p, "TEST_FIXTURES =")


def _stray_placeholder_in_summary(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "summary/summarize_zh_v1")
    edit(p, '新的摘要:"""', '新的摘要（{foo}）:"""')
    return "summary/summarize_zh_v2.py", line_of(p, "USER_TEMPLATE =")


def _missing_context_in_qa(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/retrieval_qa_zh_v1")
    edit(p, "背景信息:\n{context}\n", "背景信息:\n（无）\n")
    return "system/retrieval_qa_zh_v2.py", line_of(p, "USER_TEMPLATE =")


def _refusal_without_keyword(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_mode_strict_v1")
    edit(
        p, 'REJECTION_TRIGGER_KEYWORDS = ["无法确定"]', 'REJECTION_TRIGGER_KEYWORDS = ["查无此事"]'
    )
    return "system/kb_mode_strict_v2.py", line_of(p, "SYSTEM_PROMPT =")


def _qa_constant_missing(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_mode_assisted_v1")
    edit(p, 'REJECTION_ANSWER = "抱歉，根据现有资料无法确定该问题的答案，建议联系人工客服。"\n', "")
    return "system/kb_mode_assisted_v2.py", None


def _canary_not_in_system(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_qa_v2")
    edit(p, 'CANARY = "KBQA-V2-CANARY-7F3A9C"', 'CANARY = "KBQA-V3-CANARY-000000"')
    return "system/kb_qa_v3.py", line_of(p, "CANARY =")


def _no_fallback(lib: Path) -> tuple[str, int | None]:
    # two versions and no entry: which one is live is a decision nobody wrote down
    edit(lib / "releases.toml", '[prompts."system/kb_qa"]\nactive = "v2"\nfallback = "v1"\n', "")
    return "system/kb_qa_v2.py", None


def _release_unknown_version(lib: Path) -> tuple[str, int | None]:
    edit(
        lib / "releases.toml",
        '[prompts."judge/relevance"]\nactive = "v1"',
        '[prompts."judge/relevance"]\nactive = "v4"',
    )
    return "releases.toml", line_of(lib / "releases.toml", '[prompts."judge/relevance"]')


def _locked_file_edited(lib: Path) -> tuple[str, int | None]:
    edit(lib / "judge/relevance_v1.py", "1 分：答非所问。", "1 分：答非所问或拒答。")
    return "judge/relevance_v1.py", None


def _released_not_locked(lib: Path) -> tuple[str, int | None]:
    copy_as_next(lib, "rewrite/multi_query_v1")
    edit(
        lib / "releases.toml",
        '[prompts."rewrite/multi_query"]\nactive = "v1"',
        '[prompts."rewrite/multi_query"]\nactive = "v2"',
    )
    return "rewrite/multi_query_v2.py", None


def _syntax_error(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "rewrite/standalone_v1")
    edit(p, 'RESPONSE_FORMAT = "json"', 'RESPONSE_FORMAT = "json"(')
    return "rewrite/standalone_v2.py", line_of(p, "RESPONSE_FORMAT =")


def _side_effect(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "safety/content_filter_v1")
    edit(p, "RESPONSE_FORMAT = ", 'print("loaded")\nRESPONSE_FORMAT = ')
    return "safety/content_filter_v2.py", line_of(p, 'print("loaded")')


def _computed_constant(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "classify/intent_v1")
    edit(p, 'RESPONSE_FORMAT = "json"', 'RESPONSE_FORMAT = "JSON".lower()')
    return "classify/intent_v2.py", line_of(p, "RESPONSE_FORMAT =")


def _bad_template(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "rewrite/multi_query_v1")
    edit(p, "用户问题：{question}", "用户问题：{question} {0}")
    return "rewrite/multi_query_v2.py", line_of(p, "USER_TEMPLATE =")


def _constant_wrong_type(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "summary/summarize_en_v1")
    edit(p, "SYSTEM_PROMPT = None", "SYSTEM_PROMPT = 42")
    return "summary/summarize_en_v2.py", line_of(p, "SYSTEM_PROMPT =")


def _bad_file_name(lib: Path) -> tuple[str, int | None]:
    src = (lib / "judge/relevance_v1.py").read_text(encoding="utf-8")
    (lib / "judge/relevance-v2.py").write_text(src, encoding="utf-8")
    return "judge/relevance-v2.py", None


def _malformed_change_line(lib: Path) -> tuple[str, int | None]:
    p = copy_as_next(lib, "system/kb_qa_v1")
    edit(p, "- v1 (2026-04-01): 初版", "- v1 2026/04/01 初版")
    return "system/kb_qa_v3.py", line_of(p, "- v1 2026/04/01")


CASES: dict[str, tuple[str, Mutation]] = {
    "version/filename mismatch": ("P001", _version_mismatch),
    "header missing": ("P002", _header_missing),
    "missing header field": ("P003", _header_field_missing),
    "header version mismatch": ("P004", _header_version_mismatch),
    "header models != APPLICABLE_MODELS": ("P005", _header_models_mismatch),
    "empty APPLICABLE_MODELS": ("P006", _models_empty),
    "2 fixtures": ("P007", _two_fixtures),
    "6 fixtures": ("P007", _six_fixtures),
    "fixture without expected phrases": ("P008", _fixture_shape),
    "missing {context} in a QA prompt": ("P009", _missing_context_in_qa),
    "stray {foo} in a summary prompt": ("P010", _stray_placeholder_in_summary),
    "refusal wording without trigger keyword": ("P011", _refusal_without_keyword),
    "QA prompt without REJECTION_ANSWER": ("P012", _qa_constant_missing),
    "canary not in system prompt": ("P013", _canary_not_in_system),
    "prompt without fallback": ("P014", _no_fallback),
    "release names a missing version": ("P015", _release_unknown_version),
    "locked file edited": ("P016", _locked_file_edited),
    "released but not locked": ("P017", _released_not_locked),
    "syntax error": ("P000", _syntax_error),
    "top-level side effect": ("P018", _side_effect),
    "computed constant": ("P018", _computed_constant),
    "positional placeholder": ("P019", _bad_template),
    "constant of the wrong type": ("P020", _constant_wrong_type),
    "bad file name": ("P021", _bad_file_name),
    "malformed changelog line": ("P022", _malformed_change_line),
}

# a second, independent breakage proves the other modules are still checked
PLANTED_FILE = "judge/correctness_v2.py"


def _plant(lib: Path) -> None:
    p = copy_as_next(lib, "judge/correctness_v1")
    edit(
        p,
        '"question", "golden_answer", "candidate"]',
        '"question", "golden_answer", "candidate", "extra"]',
    )


def test_shipped_library_is_clean() -> None:
    reg = build_registry(default_root())
    assert [v.format() for v in reg.check()] == []
    # every prompt module on disk is loaded and checked (whatever their number)
    on_disk = {p for p in default_root().glob("*/*_v*.py") if p.is_file()}
    assert {m.path for m in reg.modules} == on_disk and on_disk


@pytest.mark.parametrize("case", list(CASES))
def test_rule(case: str, lib: Path, rag: Callable[..., object]) -> None:
    code, mutate = CASES[case]
    rel, line = mutate(lib)
    _plant(lib)
    violations = build_registry(lib).check()
    on_file = [v for v in violations if v.file == rel]
    assert {v.code for v in on_file} == {code}, [v.format() for v in violations]
    assert line in {v.line for v in on_file}
    assert all(v.message and v.fix for v in on_file)
    # the planted breakage elsewhere is reported too: checking did not stop at the first file
    planted = [v for v in violations if v.file == PLANTED_FILE]
    assert [v.code for v in planted] == ["P009"]
    # nothing else in the tree is flagged
    assert {v.file for v in violations} == {rel, PLANTED_FILE}

    result = rag("prompts", "check", "--root", str(lib), "--json")
    assert result.code == 1
    data = json.loads(result.out)
    assert data["ok"] is False
    assert any(
        v["code"] == code and v["file"] == rel and v["line"] == line for v in data["violations"]
    )
    assert data["modules"] >= 20


def test_all_violations_listed_in_text_output(lib: Path, rag: Callable[..., object]) -> None:
    _syntax_error(lib)
    _stray_placeholder_in_summary(lib)
    result = rag("prompts", "check", "--root", str(lib))
    out = result.out
    assert result.code == 1
    assert "rewrite/standalone_v2.py:" in out and "P000 syntax-error" in out
    assert "summary/summarize_zh_v2.py:" in out and "P010 variable-unexpected" in out
    assert "fix: " in out
    assert "2 violation(s) in 2 file(s)" in out


def test_a_single_version_prompt_needs_no_release_entry(lib: Path, rag: Callable[..., Any]) -> None:
    """Its one version is active and fallback without an entry (an entry could say nothing
    else); it still has to be locked; a second version makes the entry necessary, and
    ``rag prompts new`` writes it with the live version still live."""
    edit(lib / "releases.toml", '[prompts."classify/intent"]\nactive = "v1"\nfallback = "v1"\n', "")
    reg = build_registry(lib)
    assert [v.format() for v in reg.check()] == []
    rel = reg.release("classify/intent")
    assert rel is not None and (rel.active, rel.fallback) == (1, 1)
    assert reg.get("classify/intent").qualified == "classify/intent_v1"
    # released, so it must be locked: P017 without its lock line, which `rag prompts lock` writes
    edit(lib / "prompts.lock", '"classify/intent_v1"', '"classify/intent_v0"')
    codes = {v.code for v in build_registry(lib).check() if v.file == "classify/intent_v1.py"}
    assert codes == {"P017"}
    result = rag("prompts", "lock", "--root", str(lib))
    assert result.code == 0 and "classify/intent_v1" in result.out
    assert [v.format() for v in build_registry(lib).check()] == []
    # a second version: `rag prompts new` writes the entry, v1 stays live
    result = rag("prompts", "new", "classify/intent", "--root", str(lib), "--author", "t")
    assert result.code == 0
    reg = build_registry(lib)
    rel = reg.release("classify/intent")
    assert rel is not None and (rel.active, rel.fallback) == (1, 1) and rel.line is not None
    assert reg.get("classify/intent").qualified == "classify/intent_v1"
    assert not [v for v in reg.check() if v.code == "P014"]
    # without the entry, two versions are a P014: which one is live was never decided
    text = (lib / "releases.toml").read_text(encoding="utf-8")
    (lib / "releases.toml").write_text(
        text.replace('[prompts."classify/intent"]\nactive = "v1"\nfallback = "v1"\n', ""),
        encoding="utf-8",
    )
    codes = {v.code for v in build_registry(lib).check() if v.file == "classify/intent_v2.py"}
    assert "P014" in codes
