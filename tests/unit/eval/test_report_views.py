"""The lean views (msgspec structs) are derived from the report records: a field renamed in the
records is renamed in a view that keeps every field, and a view naming the old field fails at
import, with the field's name — never a silent drift of the two."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import msgspec
import pytest
from pydantic import BaseModel, Field

from app.eval.report.views import view_of

APP = Path(__file__).resolve().parents[3] / "app"


class Inner(BaseModel):
    value: float | None
    note: str = "n"


class Outer(BaseModel):
    id: str
    tags: list[str]
    scores: dict[str, Inner]
    cost: float = Field(ge=0)
    kept: list[int] = Field(default_factory=list)
    trace: dict[str, str] | None


def test_a_view_has_the_records_fields_types_defaults_and_bounds() -> None:
    inner = view_of(Inner, "InnerView")
    outer = view_of(Outer, "OuterView", exclude={"trace"}, nested={Inner: inner}, gc=False)
    fields = {f.name: f for f in msgspec.structs.fields(outer)}
    assert list(fields) == ["id", "tags", "scores", "cost", "kept"]  # the model's order
    assert fields["scores"].type == dict[str, inner]
    assert fields["cost"].type == Annotated[float, msgspec.Meta(ge=0)]
    assert fields["kept"].default_factory is list and fields["id"].required
    assert outer.__struct_config__.frozen and not outer.__struct_config__.gc
    decoded = msgspec.json.decode(
        b'{"id":"a","tags":["x"],"scores":{"m":{"value":1}},"cost":0.5,"trace":null,"extra":1}',
        type=outer,
    )
    assert decoded.scores["m"].note == "n" and decoded.kept == []  # type: ignore[attr-defined]
    with pytest.raises(msgspec.ValidationError, match=r"cost"):
        msgspec.json.decode(b'{"id":"a","tags":[],"scores":{},"cost":-1}', type=outer)


def test_a_view_naming_a_missing_field_or_a_record_without_view_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Outer has no field\(s\) refused"):
        view_of(Outer, "V", fields=("id", "refused"))
    with pytest.raises(TypeError, match=r"Outer.scores: Inner is a record with no view"):
        view_of(Outer, "V", fields=("id", "scores"))


def _import_with(tmp_path: Path, file: str, old: str, new: str, module: str) -> str:
    """Import ``module`` from a copy of ``app/`` whose ``file`` has ``old`` replaced by
    ``new``; return what the import printed on stderr (it must fail)."""
    copy = tmp_path / "copy"
    shutil.copytree(APP, copy / "app", ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / "app" / file
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        cwd=copy,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0, f"{module} imported with {new!r} planted"
    return done.stderr


@pytest.mark.parametrize(
    ("file", "old", "new", "module", "message"),
    [
        (  # the case record: the compare view names it
            "eval/report/records.py",
            "    refused: bool | None\n",
            "    declined: bool | None\n",
            "app.eval.report.stream",
            "view CompareCase: CaseResult has no field(s) refused",
        ),
        (  # the score record
            "eval/scoring/base.py",
            "    reason: str | None = None\n",
            "    why: str | None = None\n",
            "app.eval.report.stream",
            "view CompareScore: Score has no field(s) reason",
        ),
        (  # the trace record: the viewer's view names it
            "generation/pipeline/trace.py",
            "    latency_ms: float = 0.0\n",
            "    elapsed_ms: float = 0.0\n",
            "app.view.stream",
            "view TraceBits: Trace has no field(s) latency_ms",
        ),
    ],
)
def test_a_planted_field_rename_in_the_records_breaks_the_views_at_import(
    tmp_path: Path, file: str, old: str, new: str, module: str, message: str
) -> None:
    assert message in _import_with(tmp_path, file, old, new, module)


def test_the_lean_case_follows_a_renamed_field() -> None:
    """A view that keeps every field but the trace takes the record's fields as they are."""

    class Renamed(BaseModel):
        id: str
        declined: bool | None
        trace: str | None

    lean = view_of(Renamed, "LeanRenamed", exclude={"trace"})
    assert [f.name for f in msgspec.structs.fields(lean)] == ["id", "declined"]
