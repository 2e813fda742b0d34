"""A process that loads one KB twice (a run's dataset check, then its pipeline) parses each
document once; a changed document, another KB name or a broken file is never served from
that memo (app/retrieval/kb.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.errors import DatasetError
from app.retrieval import kb as kb_module
from app.retrieval.kb import load_kb

DOC = "---\ntitle: 年假制度\nacl: [employee]\n---\n# 年假制度\n\n每年十天。\n\n## 申请\n\n提前三天。\n"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths parse_document was really called for (the memo starts empty)."""
    seen: list[str] = []
    real = kb_module.parse_document

    def counting(kb: str, path: str, raw: str) -> Any:
        seen.append(path)
        return real(kb, path, raw)

    monkeypatch.setattr(kb_module, "parse_document", counting)
    monkeypatch.setattr(kb_module, "_PARSED", {})
    yield seen


def _kb(root: Path, text: str = DOC) -> Path:
    (root / "hr").mkdir(parents=True)
    (root / "hr" / "leave.md").write_text(text, encoding="utf-8")
    (root / "hr" / "other.md").write_text(text.replace("年假", "病假"), encoding="utf-8")
    return root


def test_a_second_load_parses_nothing_and_gives_the_same_kb(
    tmp_path: Path, parses: list[str]
) -> None:
    root = _kb(tmp_path / "sample")
    first = load_kb(root)
    assert sorted(parses) == ["hr/leave.md", "hr/other.md"]
    second = load_kb(root)
    assert len(parses) == 2  # nothing parsed again
    assert second == first
    assert [c.chunk_id for c in second.chunks] == [
        "sample:hr/leave.md#0",
        "sample:hr/leave.md#1",
        "sample:hr/other.md#0",
        "sample:hr/other.md#1",
    ]
    assert second.chunk("sample:hr/leave.md#1").text == "## 申请\n\n提前三天。"  # type: ignore[union-attr]


def test_a_changed_document_is_parsed_again_and_only_it(tmp_path: Path, parses: list[str]) -> None:
    root = _kb(tmp_path / "sample")
    load_kb(root)
    (root / "hr" / "leave.md").write_text(DOC.replace("十天", "十五天"), encoding="utf-8")
    after = load_kb(root)
    assert sorted(parses) == ["hr/leave.md", "hr/leave.md", "hr/other.md"]
    assert "每年十五天。" in after.chunk("sample:hr/leave.md#0").text  # type: ignore[union-attr]


def test_the_same_text_in_another_kb_gets_its_own_chunk_ids(
    tmp_path: Path, parses: list[str]
) -> None:
    load_kb(_kb(tmp_path / "sample"))
    other = load_kb(_kb(tmp_path / "policies"))
    assert len(parses) == 4
    assert {c.chunk_id.split(":")[0] for c in other.chunks} == {"policies"}


def test_a_broken_document_fails_every_time(tmp_path: Path, parses: list[str]) -> None:
    root = _kb(tmp_path / "sample", text="---\ntitle: [unclosed\n---\n正文\n")
    for _ in range(2):
        with pytest.raises(DatasetError):
            load_kb(root)
