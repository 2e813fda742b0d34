"""Dates no calendar has are errors, and `rag datasets check` prints a bounded output for a
file of thousands of identical problems."""

from __future__ import annotations

from pathlib import Path

from _datasets_support import check, line, valid_case
from click.testing import CliRunner

from app.cli.datasets import MAX_SAME
from app.cli.datasets import check as check_cmd


def test_an_impossible_annotation_date_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "d_v1.0.jsonl"
    rows = [valid_case("d-1", annotated_at=day) for day in ("2026-13-45", "2026-02-30")]
    path.write_text("".join(line(c) + "\n" for c in [*rows, valid_case("d-3")]), encoding="utf-8")
    result = check(path, folder=tmp_path)
    bad = [(i.line, i.field) for i in result.issues if i.severity == "error"]
    assert (1, "annotated_at") in bad and (2, "annotated_at") in bad
    assert not [i for i in result.issues if i.line == 3 and i.field == "annotated_at"]


def test_repeated_messages_are_capped(tmp_path: Path) -> None:
    """300 KB of `{}` lines printed 102 MB: every line's every missing field, in full."""
    path = tmp_path / "e_v1.0.jsonl"
    path.write_text("{}\n" * 500, encoding="utf-8")
    res = CliRunner().invoke(check_cmd, [str(path), "--lang", "en"])
    assert res.exit_code == 1, res.output
    lines = res.output.splitlines()
    ids = [x for x in lines if ": id: " in x]
    assert len(ids) == MAX_SAME
    assert (
        f"{500 - MAX_SAME} more id: missing-field problem(s) like these, lines 21–500" in res.output
    )
    assert len(res.output) < 50_000 and lines[-1].startswith("checked 1 file(s), 500 case(s)")
