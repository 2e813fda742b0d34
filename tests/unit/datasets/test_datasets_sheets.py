"""Spreadsheets (issue 11): export → import loses nothing (byte-identical JSONL for every
shipped suite, CSV and XLSX), list cells split on ；/;, errors name row and column."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from _datasets_support import DATASETS, kb, valid_case

from app.cli import main
from app.eval.datasets.case import Suite, load_dataset_file, load_suite
from app.eval.datasets.sheets import COLUMNS, export_rows, read_sheet, rows_to_jsonl, write_sheet

SHIPPED = ["smoke", "full", "hard", "adversarial"]


def round_trip(suite: Suite, tmp_path: Path, kind: str) -> str:
    sheet = tmp_path / f"{suite.name}.{kind}"
    sheet.unlink(missing_ok=True)
    write_sheet(export_rows(suite), sheet, kind)
    cases, letters, issues = read_sheet(sheet)
    assert issues == []
    text, checked = rows_to_jsonl(
        cases, suite=suite.name, file=sheet.name, kb=kb(), letters=letters
    )
    assert [i for i in checked if i.severity == "error"] == []
    return text


@pytest.mark.parametrize("kind", ["csv", "xlsx"])
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_suite_round_trips_byte_identical(
    tmp_path: Path, name: str, kind: str
) -> None:
    suite = load_suite(name, root=DATASETS)
    first = round_trip(suite, tmp_path, kind)
    assert first == suite.path.read_text(encoding="utf-8")  # nothing lost, nothing reordered
    again = tmp_path / f"{name}_v9.0.jsonl"
    again.write_text(first, encoding="utf-8")
    assert round_trip(load_dataset_file(again), tmp_path, kind) == first  # import→export→import


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return path


def row(**cells: str) -> dict[str, str]:
    base = {
        "id": "t-001",
        "question": "新员工入职需要带什么？",
        "golden_answer": "身份证、学历证书、体检报告等。",
        "golden_chunk_ids": "sample:hr/onboarding.md#1",
        "must_include": "身份证；体检报告",  # the full-width separator an expert types
        "acl": "public",
        "tags": "hr; onboarding",
        "annotator": "zhangsan",
        "expected_refusal": "false",
        "version": "1",
    }
    base.update(cells)
    return base


def test_list_cells_split_on_either_semicolon(tmp_path: Path) -> None:
    sheet = write_rows(tmp_path / "s.csv", [row()])
    cases, letters, issues = read_sheet(sheet)
    assert issues == []
    [case] = cases
    assert case["must_include"] == ["身份证", "体检报告"] and case["tags"] == ["hr", "onboarding"]
    assert case["expected_refusal"] is False and case["version"] == 1
    assert "history" not in case and "reviewed_by" not in case  # empty cell: left out
    assert letters["acl"] == "J"


def test_values_that_cannot_be_plain_cells_fall_back_to_json(tmp_path: Path) -> None:
    odd = valid_case(
        "t-9",
        must_include=["A;B", " 身份证"],
        history=[{"role": "user", "content": "第一行\n第二行"}],
        golden_rewrite="新员工入职需要带什么？",
        must_not_include=[],
    )
    path = tmp_path / "odd_v1.0.jsonl"
    import json

    path.write_text(json.dumps(odd, ensure_ascii=False) + "\n", encoding="utf-8")
    suite = load_dataset_file(path)
    for kind in ("csv", "xlsx"):
        text = round_trip(suite, tmp_path, kind)
        assert json.loads(text) == json.loads(suite.cases[0].model_dump_json(exclude_unset=True))


def test_errors_name_row_and_column(tmp_path: Path) -> None:
    sheet = write_rows(
        tmp_path / "bad.csv",
        [
            row(),
            row(id="t-002", expected_refusal="maybe"),
            row(id="t-003", acl="staff"),
            row(id="t-001"),
            row(id="t-005", history="bot: hi"),
        ],
    )
    cases, letters, issues = read_sheet(sheet)
    _, checked = rows_to_jsonl(cases, suite="t", file="bad.csv", kb=kb(), letters=letters)
    shown = [i.format("bad.csv") for i in [*issues, *checked] if i.severity == "error"]
    assert any(
        s.startswith("bad.csv: row 3, column K (expected_refusal): 'maybe' is not true")
        for s in shown
    )
    assert any(
        s.startswith('bad.csv: row 4, column J (acl[0]): "staff" is not one of') for s in shown
    )
    assert any(
        s.startswith('bad.csv: row 5, column A (id): "t-001" is already used') for s in shown
    )
    assert any(
        s.startswith("bad.csv: row 6, column C (history): line 1 of the cell") for s in shown
    )


def test_cli_export_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    folder = root / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    (folder / "smoke_v1.0.jsonl").write_bytes((DATASETS / "smoke_v1.0.jsonl").read_bytes())
    (folder / "CHANGELOG.md").write_text("# changelog\n", encoding="utf-8")
    kb_target = root / "tests" / "eval" / "kb"
    kb_target.mkdir(parents=True)
    (kb_target / "sample").symlink_to(DATASETS.parent / "kb" / "sample")
    monkeypatch.setenv("RAG_ROOT", str(root))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "export", "smoke", "--xlsx", "--out", "s.xlsx"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "s.xlsx", "--suite", "smoke"])
    assert (
        exc.value.code == 0
        and "identical to smoke_v1.0.jsonl: nothing written" in capsys.readouterr().out
    )
    # an edited sheet becomes the next version, with a CHANGELOG entry
    rows = export_rows(load_suite("smoke", root=folder))
    rows[1][COLUMNS.index("question")] = "入职要带什么材料？"
    write_sheet(rows, tmp_path / "edited.csv", "csv")
    with pytest.raises(SystemExit) as exc:
        main(
            ["datasets", "import", "edited.csv", "--suite", "smoke", "--note", "clearer smoke-001"]
        )
    assert exc.value.code == 0
    assert load_suite("smoke", root=folder).version == "1.1"
    assert load_suite("smoke", root=folder).cases[0].question == "入职要带什么材料？"
    assert "- clearer smoke-001" in (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    # a broken sheet: exit 1, nothing written
    rows[2][COLUMNS.index("acl")] = "staff"
    write_sheet(rows, tmp_path / "broken.csv", "csv")
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "broken.csv", "--suite", "smoke"])
    assert exc.value.code == 1
    assert "broken.csv: row 3, column J (acl[0])" in capsys.readouterr().out
    assert not (folder / "smoke_v1.2.jsonl").exists()


def test_import_out_is_written_by_the_one_atomic_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `rag datasets import --out` used to link an unsynced temp file into place
    import os

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    rows = export_rows(load_suite("smoke", root=DATASETS))
    write_sheet(rows, tmp_path / "s.csv", "csv")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "import", "s.csv", "--suite", "smoke", "--out", "new.jsonl"])
    assert exc.value.code == 0 and synced
    assert (tmp_path / "new.jsonl").read_bytes() == (DATASETS / "smoke_v1.0.jsonl").read_bytes()
    with pytest.raises(SystemExit) as exc:  # never replaces a file
        main(["datasets", "import", "s.csv", "--suite", "smoke", "--out", "new.jsonl"])
    assert exc.value.code != 0 and "already exists" in capsys.readouterr().err
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


FORMULAS = ['=HYPERLINK("http://evil.example","点我")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"]


def test_a_csv_cell_is_never_a_formula_and_still_round_trips(tmp_path: Path) -> None:
    """A cell starting with = + - @ (or a tab / CR) is run as a formula when the CSV is opened
    in Excel — CSV injection (OWASP). The export guards it with a leading ' (a text cell),
    and the import takes exactly that ' off again, so nothing is lost — also for a value that
    itself starts with ' followed by such a character."""
    import json

    odd = valid_case(
        "t-8",
        golden_answer=FORMULAS[0],
        must_include=FORMULAS[1:2],
        golden_rewrite="'=already quoted",
        annotator="\t=tabbed",
    )
    odd["must_not_include"] = FORMULAS[2:]
    path = tmp_path / "odd_v1.0.jsonl"
    path.write_text(json.dumps(odd, ensure_ascii=False) + "\n", encoding="utf-8")
    suite = load_dataset_file(path)
    sheet = tmp_path / "odd.csv"
    write_sheet(export_rows(suite), sheet, "csv")
    with sheet.open(encoding="utf-8-sig", newline="") as f:
        header, row = list(csv.reader(f))
    cells = dict(zip(header, row, strict=True))
    dangerous = tuple("=+-@\t\r")
    assert not [n for n, v in cells.items() if v.startswith(dangerous)], cells
    assert cells["golden_answer"] == "'" + FORMULAS[0]
    assert cells["golden_rewrite"] == "''=already quoted"
    assert cells["question"] == odd["question"]  # an ordinary text is written as it is
    for kind in ("csv", "xlsx"):
        text = round_trip(suite, tmp_path, kind)
        assert json.loads(text) == json.loads(suite.cases[0].model_dump_json(exclude_unset=True))
