"""The lean report reader (app/eval/report/stream.py): the same views as the full typed
load, for every layout; bad input is a ReportError naming file, line, case id and field."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from app.errors import ReportError
from app.eval.report.io import load_report
from app.eval.report.records import CaseResult, Repeat, ReportSummary, Sample
from app.eval.report.stream import (
    CompareCase,
    CompareScore,
    LeanCase,
    LeanScore,
    NotLineLayout,
    iter_case_lines,
    iter_cases,
    load_lean,
    project,
    read_summary,
    typed_case,
)
from app.eval.report.views import LeanRepeat, LeanSample
from app.eval.scoring.base import Score
from tests.support.reports import run_smoke

REPO = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------- the views match the models


def _norm(tp: Any) -> Any:
    """A type with Annotated stripped and the lean structs named as their pydantic models."""
    if tp in (LeanScore, CompareScore):
        return Score
    if tp is LeanRepeat:
        return Repeat
    if tp is LeanSample:
        return Sample
    if typing.get_origin(tp) is typing.Annotated:
        return _norm(typing.get_args(tp)[0])
    origin = typing.get_origin(tp)
    if origin is None:
        return tp
    args = tuple(_norm(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return frozenset(args)
    return (origin, args)


@pytest.mark.parametrize(
    ("lean", "model", "left_out"),
    [
        (LeanCase, CaseResult, {"trace"}),
        (LeanScore, Score, {"detail"}),
        (
            CompareCase,
            CaseResult,
            {"question", "difficulty", "expected_refusal", "trace", "errors", "red_lines"}
            | {"cost_usd", "invalid_text"},
        ),
        (CompareScore, Score, {"samples", "spread", "n_errors", "detail"}),
        (LeanRepeat, Repeat, set()),
        (LeanSample, Sample, set()),
    ],
)
def test_lean_views_are_the_models_fields(lean: Any, model: Any, left_out: set[str]) -> None:
    hints = typing.get_type_hints(lean, include_extras=True)
    model_hints = typing.get_type_hints(model)
    fields = {f.name: f for f in msgspec.structs.fields(lean)}
    # every model field is in the view or deliberately left out: a new field fails here
    assert set(model.model_fields) - set(fields) == left_out
    for name, field in fields.items():
        assert name in model.model_fields, f"{lean.__name__}.{name} is not a model field"
        assert _norm(hints[name]) == _norm(model_hints[name]), name
        assert field.required == model.model_fields[name].is_required(), name
        if not field.required and field.default_factory is not msgspec.NODEFAULT:
            factory = model.model_fields[name].default_factory
            assert factory is not None and field.default_factory() == factory(), name  # type: ignore[call-arg]
        elif not field.required:
            assert field.default == model.model_fields[name].default, name


def test_lean_case_keeps_the_cost_bound() -> None:
    bad = json.dumps(_case_dict("x", cost_usd=-1.0)).encode()
    with pytest.raises(ReportError, match=r"cost_usd"):
        load_one(bad)


# ---------------------------------------------------------------- real reports


@pytest.fixture(scope="module")
def run_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_smoke(tmp_path_factory.mktemp("run"), 8)


def _full_view(path: Path) -> tuple[dict[str, Any], list[LeanCase]]:
    full = load_report(path, traces=False)
    return full.model_dump(exclude={"cases"}), [project(c) for c in full.cases]


def test_a_run_report_is_streamed_and_equals_the_full_load(run_report: Path) -> None:
    lean = load_lean(run_report)
    assert lean.layout == "lines"
    summary, cases = _full_view(run_report)
    assert len(cases) == 8
    assert lean.summary.model_dump() == summary
    assert lean.cases == cases
    assert list(iter_cases(run_report)) == cases
    small = load_lean(run_report, CompareCase)
    assert small.cases == [project(c, CompareCase) for c in load_report(run_report).cases]
    assert [c.answer for c in small.cases] == [c.answer for c in cases]
    assert read_summary(run_report).model_dump() == summary
    lines = list(iter_case_lines(run_report))
    assert [n for n, _ in lines] == list(range(2, 10))
    # each raw line is that case's full JSON: the typed case equals the full load's
    full = load_report(run_report)
    assert [typed_case(raw, run_report, n) for n, raw in lines] == full.cases


@pytest.mark.parametrize("indent", [None, 2])
def test_other_layouts_give_the_same_views(run_report: Path, tmp_path: Path, indent: Any) -> None:
    copy = tmp_path / "copy.json"
    data = json.loads(run_report.read_text(encoding="utf-8"))
    copy.write_text(json.dumps(data, ensure_ascii=False, indent=indent), encoding="utf-8")
    lean = load_lean(copy)
    assert lean.layout == "document"
    summary, cases = _full_view(run_report)
    assert lean.summary.model_dump() == summary
    assert lean.cases == cases
    with pytest.raises(NotLineLayout):
        iter_case_lines(copy)
    assert list(iter_cases(copy)) == cases


def test_a_schema_1_report_is_read_through_the_typed_loader() -> None:
    path = REPO / "tests" / "data" / "reports" / "v1_adversarial.json"
    lean = load_lean(path)
    assert lean.layout == "typed"
    summary, cases = _full_view(path)
    assert lean.summary.model_dump() == summary
    assert lean.cases == cases


def test_an_empty_case_list(tmp_path: Path, run_report: Path) -> None:
    head = run_report.read_bytes().split(b"\n", 1)[0]
    path = tmp_path / "empty.json"
    path.write_bytes(head + b"\n\n]}\n")
    assert load_lean(path).cases == []
    assert json.loads(path.read_text(encoding="utf-8"))["cases"] == []


# ---------------------------------------------------------------- bad input


def _case_dict(cid: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": cid,
        "question": "q?",
        "tags": ["hr"],
        "difficulty": None,
        "expected_refusal": False,
        "metrics": {"faithfulness": {"value": 4.0}},
        "answer": "a",
        "refused": False,
        "trace": None,
        "errors": [],
        "red_lines": [],
        "cost_usd": 0.0,
    }
    return {**base, **over}


def load_one(case_line: bytes) -> LeanCase:
    from app.eval.report.stream import decode_case

    return decode_case(case_line, Path("r.json"), 2)


def _with_lines(run_report: Path, tmp_path: Path, edit: Any) -> Path:
    lines = run_report.read_bytes().split(b"\n")
    edit(lines)
    path = tmp_path / "edited.json"
    path.write_bytes(b"\n".join(lines))
    return path


def _second_case_id(run_report: Path) -> str:
    return str(json.loads(run_report.read_text(encoding="utf-8"))["cases"][1]["id"])


def test_bad_json_on_a_case_line_names_line_and_case(run_report: Path, tmp_path: Path) -> None:
    path = _with_lines(run_report, tmp_path, lambda ls: ls.__setitem__(2, ls[2][:-40] + b","))
    with pytest.raises(ReportError) as exc:
        load_lean(path)
    assert f"{path}:3" in str(exc.value)
    assert "not valid JSON" in str(exc.value)
    with pytest.raises(ReportError):  # the full loader agrees it is broken
        load_report(path)


def test_a_wrong_field_names_line_case_and_field(run_report: Path, tmp_path: Path) -> None:
    cid = _second_case_id(run_report)

    def edit(ls: list[bytes]) -> None:
        data = json.loads(ls[2][:-1])
        data["tags"] = 5
        ls[2] = json.dumps(data, ensure_ascii=False).encode() + b","

    path = _with_lines(run_report, tmp_path, edit)
    with pytest.raises(ReportError) as exc:
        load_lean(path)
    message = str(exc.value)
    assert f"{path}:3 (case {cid})" in message
    assert "tags" in message
    with pytest.raises(ReportError, match="tags"):
        load_report(path)


def test_what_pydantic_coerces_is_read_as_the_full_load_reads_it(
    run_report: Path, tmp_path: Path
) -> None:
    def edit(ls: list[bytes]) -> None:
        data = json.loads(ls[2][:-1])
        name = next(k for k, v in data["metrics"].items() if v["value"] is not None)
        data["metrics"][name]["value"] = str(data["metrics"][name]["value"])  # "1.0"
        ls[2] = json.dumps(data, ensure_ascii=False).encode() + b","

    path = _with_lines(run_report, tmp_path, edit)
    assert load_lean(path).cases == _full_view(path)[1]
    one_line = tmp_path / "one_line.json"  # the same file as one JSON document
    one_line.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8"))), encoding="utf-8")
    lean = load_lean(one_line)
    assert lean.layout == "document" and lean.cases == _full_view(path)[1]


def test_null_without_reason_is_refused_like_the_model(run_report: Path, tmp_path: Path) -> None:
    def edit(ls: list[bytes]) -> None:
        data = json.loads(ls[2][:-1])
        name = next(iter(data["metrics"]))
        data["metrics"][name] = {"value": None, "reason": None}
        ls[2] = json.dumps(data, ensure_ascii=False).encode() + b","

    path = _with_lines(run_report, tmp_path, edit)
    with pytest.raises(ReportError, match=r":3 \(case .*null without a reason"):
        load_lean(path)
    with pytest.raises(ReportError, match="null without a reason"):
        load_report(path)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda ls: ls.__delitem__(slice(-3, None)), "ends before its closing"),  # cut off
        (lambda ls: ls.__setitem__(-3, ls[-3] + b","), "comma after the last case"),
        (lambda ls: ls.__setitem__(2, ls[2][:-1]), "no comma after this case"),
        (lambda ls: ls.insert(-1, b"{}"), "text after"),
        (lambda ls: ls.__setitem__(3, ls[2]), "appears twice"),
    ],
)
def test_broken_layouts_are_report_errors(
    run_report: Path, tmp_path: Path, edit: Any, expected: str
) -> None:
    path = _with_lines(run_report, tmp_path, edit)
    with pytest.raises(ReportError, match=expected):
        load_lean(path)
    with pytest.raises(ReportError):  # and the full loader refuses them too
        load_report(path)


def test_a_bad_summary_names_the_first_line(run_report: Path, tmp_path: Path) -> None:
    path = _with_lines(
        run_report, tmp_path, lambda ls: ls.__setitem__(0, ls[0].replace(b'"k":', b'"k":-'))
    )
    with pytest.raises(ReportError, match=rf"(?s){path}:1.*meta/k"):
        load_lean(path)


@pytest.mark.parametrize(
    "content", [b"", b"not json", b"[1, 2]", b'{"schema_version": "9"}', b"\xff\xfe"]
)
def test_not_a_report(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(ReportError, match=str(path)):
        load_lean(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such report"):
        load_lean(tmp_path / "absent.json")
    with pytest.raises(ReportError, match="directory"):
        load_lean(tmp_path)


def test_summary_validation_is_the_models(run_report: Path) -> None:
    assert isinstance(read_summary(run_report), ReportSummary)


@pytest.mark.parametrize("layout", ["lines", "document"])
def test_json_nested_too_deeply_is_a_report_error(
    run_report: Path, tmp_path: Path, layout: str
) -> None:
    """A value nested past the recursion limit (found by the hostile fuzz test) is refused
    with a message, not a RecursionError traceback."""
    deep = "[" * 5000 + "]" * 5000

    def edit(ls: list[bytes]) -> None:
        data = json.loads(ls[2][:-1])
        data["answer"] = None
        ls[2] = json.dumps(data, ensure_ascii=False).encode()[:-1] + b',"x":' + deep.encode()
        ls[2] += b"},"

    path = _with_lines(run_report, tmp_path, edit)
    if layout == "document":
        text = path.read_text(encoding="utf-8").replace("\n", "")
        path.write_text(text.replace('"schema_version":"2"', '"schema_version": "2"'), "utf-8")
    with pytest.raises(ReportError, match="nested too deeply"):
        load_lean(path)
    with pytest.raises(ReportError, match="nested too deeply"):
        load_lean(path, CompareCase)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(b"NaN", "NaN is not a JSON number"), (b"1e400", "overflows to infinity")],
)
def test_a_summary_number_json_cannot_hold_names_the_first_line(
    run_report: Path, tmp_path: Path, value: bytes, expected: str
) -> None:
    """The summary line is parsed by msgspec; what it refuses goes the strict JSON path, whose
    message says what is wrong (issue 14: the first line was parsed twice by json.loads)."""
    path = _with_lines(
        run_report,
        tmp_path,
        lambda ls: ls.__setitem__(0, ls[0].replace(b'"k":', b'"k":' + value + b',"k2":', 1)),
    )
    assert b'"k":' + value in path.read_bytes().split(b"\n", 1)[0]
    with pytest.raises(ReportError, match=rf"(?s){path}:1.*{expected}"):
        load_lean(path)
    with pytest.raises(ReportError, match=expected):
        read_summary(path)


def test_crlf_case_lines_read_as_the_runners_layout(run_report: Path, tmp_path: Path) -> None:
    """Case lines ending ``,\r\n`` (not the one-copy fast path for ``,\n``): the same cases
    and line numbers; a whole file with Windows line endings is read as one document."""
    head, rest = run_report.read_bytes().split(b"\n", 1)
    crlf = tmp_path / "crlf.json"
    crlf.write_bytes(head + b"\n" + rest.replace(b"\n", b"\r\n"))
    lean = load_lean(crlf)
    assert lean.layout == "lines" and lean.cases == load_lean(run_report).cases
    assert [n for n, _ in iter_case_lines(crlf)] == [n for n, _ in iter_case_lines(run_report)]
    every = tmp_path / "every.json"
    every.write_bytes(run_report.read_bytes().replace(b"\n", b"\r\n"))
    assert load_lean(every).cases == lean.cases
