"""`rag eval run --dataset FILE.jsonl [--kb DIR]` and `--dataset-version` (issue 11): any
dataset file against any knowledge base, checked first like a suite; the report says which."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _datasets_support import DATASETS, line, valid_case

from app.cli import main

DOC = """---
title: 差旅政策
acl: [employee]
---
# 差旅政策

## 住宿标准

一线城市住宿标准为每晚 600 元，其他城市每晚 400 元。
"""


def own_kb(tmp_path: Path) -> Path:
    kb = tmp_path / "teamkb"
    (kb / "finance").mkdir(parents=True)
    (kb / "finance" / "travel.md").write_text(DOC, encoding="utf-8")
    return kb


def team_case(**changes: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "question": "一线城市住宿标准是多少？",
        "golden_answer": "一线城市每晚 600 元。",
        "golden_chunk_ids": ["teamkb:finance/travel.md#1"],
        "must_include": ["600 元"],
        "acl": ["employee"],
        "tags": ["finance"],
    }
    return valid_case("team-001", **{**fields, **changes})


def run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(["eval", "run", "--quiet", *args])
    return int(exc.value.code or 0)


def only_report(out: Path) -> dict[str, object]:
    [path] = sorted(out.glob("eval_*.json"))
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_a_team_file_against_its_own_kb(tmp_path: Path) -> None:
    kb = own_kb(tmp_path)
    data = tmp_path / "elsewhere" / "team_cases.jsonl"
    data.parent.mkdir()
    data.write_text(line(team_case()) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert run(["--dataset", str(data), "--kb", str(kb), "--out", str(out)]) in (0, 1)
    report = only_report(out)
    meta = report["meta"]
    assert isinstance(meta, dict)
    [ds] = meta["datasets"]
    assert (
        ds["name"] == "team_cases" and ds["path"].endswith("team_cases.jsonl") and ds["cases"] == 1
    )
    [case] = report["cases"]  # type: ignore[misc]
    assert case["id"] == "team-001"
    assert "teamkb:finance/travel.md#1" in json.dumps(case["trace"], ensure_ascii=False)


def test_the_file_is_checked_first_against_that_kb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = own_kb(tmp_path)
    data = tmp_path / "team_v1.0.jsonl"
    data.write_text(line(team_case(golden_chunk_ids=["teamkb:finance/travel.md#7"])) + "\n")
    out = tmp_path / "out"
    assert run(["--dataset", str(data), "--kb", str(kb), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not exist in the knowledge base" in err and "team_v1.0.jsonl:1" in err
    assert not out.exists()  # nothing ran


def test_dataset_version_selects_an_older_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    folder = root / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    shutil.copy(DATASETS / "smoke_v1.0.jsonl", folder / "smoke_v1.0.jsonl")
    (folder / "smoke_v1.1.jsonl").write_text(line(valid_case("smoke-900")) + "\n", "utf-8")
    (root / "tests" / "eval" / "kb").mkdir(parents=True)
    (root / "tests" / "eval" / "kb" / "sample").symlink_to(DATASETS.parent / "kb" / "sample")
    monkeypatch.setenv("RAG_ROOT", str(root))
    out = tmp_path / "out"
    assert run(["--suite", "smoke", "--limit", "2", "--out", str(out / "new")]) in (0, 1)
    assert run(
        ["--suite", "smoke", "--dataset-version", "1.0", "--limit", "2", "--out", str(out / "old")]
    ) in (0, 1)
    new = only_report(out / "new")["meta"]
    old = only_report(out / "old")["meta"]
    assert [d["version"] for d in new["datasets"]] == ["1.1"]  # type: ignore[index]
    assert [d["version"] for d in old["datasets"]] == ["1.0"]  # type: ignore[index]
    assert run(["--suite", "smoke", "--dataset-version", "3.0", "--out", str(out / "x")]) == 2
