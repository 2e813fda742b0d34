"""The run's dataset is read line by line: the check keeps an index (ids, offsets), never the
cases, and the run reads each case again when it takes it. Its limits are per line
(``dataset_line_bytes``) and per file in cases (``dataset_cases``), not the file's size."""

from __future__ import annotations

import gc
import io
import json
import tracemalloc
from pathlib import Path

import pytest

from app import limits
from app.errors import DatasetError
from app.eval.config import RunConfig
from app.eval.datasets.case import Case, load_dataset_file
from app.eval.datasets.check import check_paths
from app.eval.datasets.index import CaseQueue
from app.eval.datasets.lines import stream_lines
from app.eval.run.runner import open_run_dataset, select_positions
from app.paths import kb_dir
from app.retrieval.kb import load_kb


def _line(i: int, **extra: object) -> str:
    case = {
        "id": f"s-{i:06d}",
        "question": f"年假有多少天？第 {i} 问",
        "golden_answer": "见制度",
        "acl": ["employee"],
        "tags": ["hr"],
        "annotator": "t",
        "expected_refusal": True,  # no golden chunk needed: no warning per case
        **extra,
    }
    return json.dumps(case, ensure_ascii=False)


def _file(tmp: Path, n: int, name: str = "cases_v1.0.jsonl") -> Path:
    path = tmp / name
    path.write_text("".join(_line(i) + "\n" for i in range(n)), encoding="utf-8")
    return path


def _set_limit(monkeypatch: pytest.MonkeyPatch, name: str, value: int) -> None:
    old = limits.LIMITS[name]
    monkeypatch.setitem(limits.LIMITS, name, limits.Limit(name, value, old.unit, old.applies_to))


def test_stream_lines_skips_an_overlong_line_unread_and_keeps_offsets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _set_limit(monkeypatch, "dataset_line_bytes", 100)
    data = b"short\n" + b"x" * 5000 + b"\nlast\r\nno newline"
    got = list(stream_lines(io.BufferedReader(io.BytesIO(data), buffer_size=64)))  # type: ignore[arg-type]
    assert got == [
        (0, b"short", 5),
        (6, None, 5000),  # counted, not held
        (5007, b"last\r", 5),
        (5013, b"no newline", 10),
    ]


def test_an_overlong_line_is_an_error_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_limit(monkeypatch, "dataset_line_bytes", 1_000)
    path = tmp_path / "cases_v1.0.jsonl"
    lines = [_line(0), _line(1, golden_answer="长" * 2_000), _line(2)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = check_paths([path])
    (error,) = result.errors
    assert (error.line, error.code) == (2, "line-too-long")
    (index,) = result.loaded.values()
    assert index.ids == ["s-000000", "s-000002"]  # the other lines are checked as usual
    with pytest.raises(DatasetError, match=r"cases_v1.0.jsonl:2"):
        open_run_dataset(RunConfig(suite="s", dataset_path=str(path)))


def test_the_file_size_limit_no_longer_bounds_check_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_limit(monkeypatch, "dataset_file_bytes", 1_000)  # the file is ~10 times that
    path = _file(tmp_path, 60)
    assert path.stat().st_size > 5_000
    index = open_run_dataset(RunConfig(suite="s", dataset_path=str(path)))
    assert len(index) == 60


def test_too_many_cases_is_a_clear_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_limit(monkeypatch, "dataset_cases", 5)
    path = _file(tmp_path, 9)
    result = check_paths([path])
    assert result.fatal and result.exit_code == 2
    (error,) = result.errors
    assert error.line == 6 and "more than 5 cases" in error.format()
    with pytest.raises(DatasetError, match=r"more than 5 cases"):
        open_run_dataset(RunConfig(suite="s", dataset_path=str(path)))


def test_the_index_reads_back_the_loaders_cases_in_id_order(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"  # a BOM, CRLF, blank lines, ids not in order
    lines = [_line(i) for i in (5, 2, 9, 0)]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n\r\n".join(lines).encode("utf-8") + b"\r\n")
    index = open_run_dataset(RunConfig(suite="s", dataset_path=str(path)))
    expected = {c.id: c for c in load_dataset_file(path).cases}
    chosen = select_positions(index, 3)  # the first 3 by id, returned in file order
    assert chosen == sorted(chosen)
    assert sorted(index.ids[i] for i in chosen) == ["s-000000", "s-000002", "s-000005"]
    assert list(index.read(chosen)) == [expected[index.ids[i]] for i in chosen]


def test_a_line_edited_during_the_run_is_an_error_naming_it(tmp_path: Path) -> None:
    path = _file(tmp_path, 3)
    index = open_run_dataset(RunConfig(suite="s", dataset_path=str(path)))
    text = path.read_text(encoding="utf-8").replace("s-000001", "s-zzzzzz")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=r"cases_v1.0.jsonl:2: the line changed"):
        list(index.read(range(3)))


def _peak_growth(tmp: Path, n: int) -> int:
    """tracemalloc's peak above the start while an ``n``-case file is checked and every case
    is taken from the run's queue (the KB loaded before: the same in every call)."""
    path = _file(tmp, n, f"c_v{n}.0.jsonl")
    kb = load_kb(kb_dir())
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        result = check_paths([path], kb=kb)
        (index,) = result.loaded.values()
        queue = CaseQueue(index.read(range(len(index))))
        taken = 0
        while True:
            try:
                case = queue.popleft()
            except IndexError:
                break
            assert isinstance(case, Case)
            taken += 1
        assert taken == n
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_memory_holds_the_index_not_the_cases(tmp_path: Path) -> None:
    """Holding the cases costs ≈ 5 KB a case (the loader at 10,000 cases); the index and
    the check's table of the file's ids are about a hundred bytes."""
    small, large = _peak_growth(tmp_path, 100), _peak_growth(tmp_path, 600)
    per_case = (large - small) / 500
    assert per_case < 400, per_case


def test_a_file_that_is_no_jsonl_stops_the_check_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_limit(monkeypatch, "dataset_line_bytes", 1_000)
    path = tmp_path / "zeros_v1.0.jsonl"
    with path.open("wb") as fh:
        fh.truncate(50_000_000)  # sparse: 50 MB of zeros, no line end
    result = check_paths([path])
    assert result.fatal and result.exit_code == 2
    (error,) = result.errors
    assert error.line == 1 and "without a line end" in error.format()
