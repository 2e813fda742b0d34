"""`rag kb chunks [--search TEXT] [--acl G]` lists the chunk ids an expert cites."""

from __future__ import annotations

import json

import pytest
from _datasets_support import kb

from app.cli import main
from app.retrieval.kb import can_read


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["kb", "chunks", *args])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_search_and_acl_filter(capsys: pytest.CaptureFixture[str]) -> None:
    rows = json.loads(run(capsys, "--search", "设备丢失", "--json"))
    assert [r["id"] for r in rows] == ["sample:it/devices.md#2"]
    assert rows[0]["heading"] == "设备丢失处理" and rows[0]["acl"] == ["employee"]
    assert rows[0]["first"].startswith("设备丢失或被盗")
    assert json.loads(run(capsys, "--search", "设备丢失", "--acl", "public", "--json")) == []
    hr = json.loads(run(capsys, "--acl", "hr", "--json"))
    expected = [c.chunk_id for c in kb().chunks if can_read(["hr"], c.acl)]
    assert [r["id"] for r in hr] == expected and len(expected) < len(kb().chunks)


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "--search", "SALARY_BANDS")  # case-insensitive, matches the id
    assert "sample:hr/salary_bands.md#0  [hr]" in out
    assert out.splitlines()[-1].endswith(f"of {len(kb().chunks)}")
