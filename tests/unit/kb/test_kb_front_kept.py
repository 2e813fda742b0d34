"""Front matter already read on this machine is not parsed again (app/retrieval/kb.py,
``_kept_front``): a warm run neither imports nor runs the YAML parser, and every answer
and every error is the parser's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import DatasetError
from app.retrieval import kb as kb_module
from app.retrieval.kb import parse_document

DOC = "---\ntitle: 年假制度\nacl: [employee, hr]\n---\n# 年假制度\n\n每年十天。\n"


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty kept folder; the process's own one again afterwards."""
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    kb_module._kept_front.cache_clear()
    yield tmp_path
    kb_module._kept_front.cache_clear()


def _next_process() -> None:
    """What a new process sees: the kept file as the last one left it at exit."""
    kb_module._kept_front().flush()
    kb_module._kept_front.cache_clear()


def _no_parser(text: str) -> object:
    raise AssertionError("the YAML parser was used")


def test_a_warm_parse_reads_the_kept_pair_and_not_yaml(
    kept: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = parse_document("sample", "hr/leave.md", DOC)
    assert (cold.title, cold.acl) == ("年假制度", ("employee", "hr"))  # by hand
    _next_process()
    import yaml

    monkeypatch.setattr(yaml, "safe_load", _no_parser)
    warm = parse_document("sample", "hr/leave.md", DOC)
    assert warm == cold
    # the same front matter in another document: the same pair, still no parser
    other = parse_document("sample", "hr/other.md", DOC.replace("每年十天", "每年五天"))
    assert (other.title, other.acl) == (cold.title, cold.acl)


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("title: [unclosed\nacl: [employee]", "not valid YAML"),
        ("- just\n- a list", "must be 'key: value' lines"),
        ("title: 年假\nacl: [nobody]", "unknown"),
        ("title: 123\nacl: [employee]", "field 'title' is missing"),
        ("title: 年假\nacl: []", "field 'acl' is missing"),
    ],
)
def test_errors_are_the_same_after_the_kept_file_exists(
    kept: Path, front: str, message: str
) -> None:
    text = f"---\n{front}\n---\n# x\n\nbody\n"
    for _ in range(2):  # first parse, then a "new process" that has the kept file
        with pytest.raises(DatasetError, match=message):
            parse_document("sample", "hr/bad.md", text)
        _next_process()


def test_the_kept_file_is_named_by_the_parser_installed(kept: Path) -> None:
    name = kb_module._kept_front().name
    assert name.startswith("rag-front-matter-")
    kb_module._kept_front.cache_clear()
    assert kb_module._kept_front().name == name  # stable for one installation
