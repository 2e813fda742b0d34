"""`rag eval compare` streams a line-layout report: one decoded case at a time, kept as
columns (app/eval/compare/columns.py), no whole-file size limit but a per-line one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import app.eval.compare.columns as columns_mod
import app.eval.report.stream as stream_mod
from app.errors import ReportError
from app.eval.compare import compare_files, compare_reports, comparison_markdown
from app.eval.report.io import load_report, report_chunks
from app.eval.report.records import ReportSummary
from tests.support.reports import run_smoke


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_smoke(tmp_path_factory.mktemp("smoke"), 8)


def _write_lines(data: dict[str, Any], cases: list[dict[str, Any]], path: Path) -> None:
    summary = ReportSummary.model_validate({k: v for k, v in data.items() if k != "cases"})
    rows = lambda: (json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases)  # noqa: E731
    path.write_bytes(b"".join(report_chunks(summary, rows)()))


def _other(smoke: Path, path: Path) -> Path:
    """The smoke report reversed, one case gone, judge scores and answers moved."""
    data = json.loads(smoke.read_text(encoding="utf-8"))
    judges = {k for k, v in data["metrics"].items() if v["kind"] == "judge"}
    cases = data["cases"]
    for i, case in enumerate(cases):
        for name in judges & set(case["metrics"]):
            value = case["metrics"][name]["value"]
            if value is not None and i % 2 == 0:
                case["metrics"][name]["value"] = max(1.0, value - 1.0)
        if i % 3 == 0:
            case["answer"] = (case["answer"] or "") + " (changed)"
    cases.pop(2)
    data["run_id"] = data["run_id"][:-6] + "bbbbbb"
    _write_lines(data, cases[::-1], path)
    return path


def test_compare_holds_at_most_one_decoded_case_per_report_at_a_time(
    smoke: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = _other(smoke, tmp_path / "new.json")
    expected = compare_files(smoke, new).to_dict()
    alive = [0]
    most = [0]
    decoded = [0]

    class Tracked:
        def __init__(self, case: Any) -> None:
            self._case = case
            alive[0] += 1
            decoded[0] += 1
            most[0] = max(most[0], alive[0])

        def __getattr__(self, name: str) -> Any:
            return getattr(self._case, name)

        def __del__(self) -> None:
            alive[0] -= 1

    real = columns_mod.decode_lines

    def tracked(*args: Any, **kwargs: Any) -> Iterator[tuple[int, Any]]:
        for line_no, case in real(*args, **kwargs):
            yield line_no, Tracked(case)

    monkeypatch.setattr(columns_mod, "decode_lines", tracked)
    got = compare_files(smoke, new).to_dict()
    assert got == expected
    assert decoded[0] == 8 + 7  # every case of both files went through the stream
    assert most[0] <= 2  # the one being added and (briefly) the next: never the report


def test_a_line_layout_report_over_the_whole_file_limit_is_streamed_and_paired_in_any_order(
    smoke: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = _other(smoke, tmp_path / "new.json")
    full = compare_reports(
        load_report(smoke), load_report(new), base_name=str(smoke), new_name=str(new)
    )
    monkeypatch.setattr(stream_mod, "_max_bytes", lambda: 1000)  # both files are larger
    streamed = compare_files(smoke, new)
    assert streamed.to_dict() == full.to_dict()  # reversed order, a missing id: as typed
    assert comparison_markdown(streamed) == comparison_markdown(full)
    assert streamed.unpaired_base and streamed.answers is not None and streamed.answers.changed
    with pytest.raises(ReportError, match="limit"):  # a reader that holds it all still refuses
        stream_mod.load_lean(new)


def test_a_case_line_over_the_line_limit_is_exit_2_naming_file_and_line(
    smoke: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    data = json.loads(smoke.read_text(encoding="utf-8"))
    data["cases"][1]["answer"] = "x" * 200_000  # line 3
    big = tmp_path / "big.json"
    _write_lines(data, data["cases"], big)
    assert len(big.read_bytes().split(b"\n")[0]) < 100_000  # the summary line is within it
    monkeypatch.setattr(stream_mod, "_line_bytes", lambda: 100_000)
    with pytest.raises(SystemExit) as exc:
        main(["eval", "compare", str(smoke), str(big)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{big}:3:" in err and "report_line_bytes" in err and "Traceback" not in err


def test_a_duplicate_id_in_a_streamed_report_names_its_line(smoke: Path, tmp_path: Path) -> None:
    data = json.loads(smoke.read_text(encoding="utf-8"))
    cases = data["cases"]
    twice = tmp_path / "twice.json"
    _write_lines(data, [*cases, cases[0]], twice)
    with pytest.raises(ReportError, match=rf"{twice}:{len(cases) + 2}: case id .* appears twice"):
        compare_files(smoke, twice)


def test_big_report_writes_n_cases_with_unique_ids_and_a_shift_compare_finds(
    smoke: Path, tmp_path: Path
) -> None:
    from scripts.big_report import write_big_report

    a = write_big_report(smoke, tmp_path / "a.json", 50)
    b = write_big_report(smoke, tmp_path / "b.json", 50, shift_every=7)
    ra, rb = load_report(a), load_report(b)  # the typed reader accepts both
    assert [c.id for c in ra.cases] == [f"{ra.cases[i % 8].id[:-7]}-{i:06d}" for i in range(50)]
    assert len({c.id for c in ra.cases}) == 50 and ra.totals.cases_done == 50
    judge = ra.judge_metrics[0]
    moved = [
        i
        for i, (x, y) in enumerate(zip(ra.cases, rb.cases, strict=True))
        if x.value(judge) != y.value(judge)
    ]
    assert moved and all(i % 7 == 0 for i in moved)
    assert (
        compare_files(a, b).to_dict()
        == compare_reports(ra, rb, base_name=str(a), new_name=str(b)).to_dict()
    )


def test_two_large_reports_are_read_side_by_side_with_the_same_result_and_errors(
    smoke: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = _other(smoke, tmp_path / "new.json")
    one_by_one = compare_files(smoke, new).to_dict()
    monkeypatch.setattr(columns_mod, "PARALLEL_BYTES", 0)  # both "large": the base in a child
    assert compare_files(smoke, new).to_dict() == one_by_one
    cut = tmp_path / "cut.json"
    cut.write_bytes(smoke.read_bytes()[:-4])  # no closing ]}
    bad = tmp_path / "bad.json"
    bad.write_bytes(smoke.read_bytes().replace(b'"id":', b'"id":7,"x":', 1))  # line 2
    with pytest.raises(ReportError, match=rf"{cut}:.*ends before its closing"):
        compare_files(cut, bad)  # both refused: the base's error, as read one after the other
    with pytest.raises(ReportError, match=rf"{bad}:2"):
        compare_files(smoke, bad)


def test_a_report_over_the_case_limit_is_refused_naming_the_line(
    smoke: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.eval.report.stream as report_stream

    monkeypatch.setattr(report_stream, "limit", lambda name: 5 if name == "report_cases" else 10**9)
    with pytest.raises(ReportError, match=rf"{smoke}:7: more than 5 cases.*report_cases"):
        compare_files(smoke, smoke)
    monkeypatch.setattr(report_stream, "limit", lambda name: 8 if name == "report_cases" else 10**9)
    assert compare_files(smoke, smoke).paired == 8  # exactly at the limit: read
