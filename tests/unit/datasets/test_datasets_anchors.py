"""Golden labels anchored to their passage, on copies of the shipped KB (through RAG_ROOT).

* an unrelated section inserted near the top of every document the smoke cases point into
  moves chunk ids, yet every case's retrieval metrics stay identical and the check is green;
* deleting the passage a label points at fails the check naming the case, the old passage
  and the nearest chunks, and the printed `rag datasets repoint` command writes the next
  dataset version, which passes;
* re-chunking with another max_chars keeps every label (its passage still exists).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.eval.config import RunConfig
from app.eval.datasets.case import load_suite
from app.eval.datasets.check import check_paths
from app.eval.run.runner import run_sync
from app.paths import PACKAGE_DIR
from app.retrieval import kb as kbmod
from app.retrieval.kb import load_kb
from app.retrieval.passages import body_of, normal

REPO = PACKAGE_DIR.parent
SMOKE = load_suite("smoke").path
KB = REPO / "tests/eval/kb/sample"
UNRELATED = "## 入职前须知\n\n入职前请先阅读员工手册，并在系统中完成个人信息登记，登记截止为入职前三个工作日。\n\n"
RETRIEVAL = ("hit_rate", "recall", "mrr", "ndcg")


def _cases(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _labelled_docs() -> list[str]:
    docs = {
        cid.split(":", 1)[1].rsplit("#", 1)[0]
        for case in _cases(SMOKE)
        for cid in case.get("golden_chunk_ids", [])
    }
    return sorted(docs)


def _root(tmp: Path, name: str) -> Path:
    """A repository root with the smoke suite and a copy of the sample KB."""
    root = tmp / name
    (root / "tests/eval/datasets").mkdir(parents=True)
    shutil.copy(SMOKE, root / "tests/eval/datasets" / SMOKE.name)
    shutil.copy(SMOKE.parent / "CHANGELOG.md", root / "tests/eval/datasets/CHANGELOG.md")
    shutil.copytree(KB, root / "tests/eval/kb/sample")
    return root


def _insert_unrelated(root: Path) -> None:
    """An unrelated section before the first `##` heading of every labelled document."""
    for rel in _labelled_docs():
        doc = root / "tests/eval/kb/sample" / rel
        text = doc.read_text(encoding="utf-8")
        at = text.index("\n## ") + 1
        doc.write_text(text[:at] + UNRELATED + text[at:], encoding="utf-8")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    root = _root(tmp_path, "repo")
    monkeypatch.setenv("RAG_ROOT", str(root))
    cache = tmp_path / "cache"
    if (REPO / ".cache/embeddings").is_dir():  # the shipped embedder's vectors (a few MB)
        shutil.copytree(REPO / ".cache/embeddings", cache / "embeddings")
    monkeypatch.setenv("RAG_CACHE_DIR", str(cache))
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))
    yield root


def rag(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the `rag` CLI; its exit code and what it printed (stdout and stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out + out.err


def _retrieval(root: Path) -> dict[str, dict[str, float | None]]:
    report = run_sync(RunConfig(suite="smoke"), runs_root=root / "runs", write=False).report
    assert report.meta.retrieval.get("name") == "hybrid"  # the default retriever, embedder on
    return {c.id: {m: c.metrics[m].value for m in RETRIEVAL} for c in report.cases}


def test_shipped_labels_resolve_to_the_ids_they_were_written_for() -> None:
    kb = load_kb(KB)
    result = check_paths()
    assert not result.errors, [i.format() for i in result.errors[:3]]
    for path, index in result.loaded.items():  # the cases as the run reads them again
        written = {c["id"]: c for c in _cases(Path(path))}
        for case in index.suite().cases:
            assert case.golden_chunk_ids == written[case.id].get("golden_chunk_ids", [])
            for cid in case.golden_chunk_ids:
                assert case.anchors[cid].quote in " ".join(body_of(kb.chunk(cid)).split())  # type: ignore[arg-type]


def test_unrelated_section_moves_ids_but_not_the_metrics(env: Path) -> None:
    before = _retrieval(env)
    kb_before = load_kb(env / "tests/eval/kb/sample")
    _insert_unrelated(env)
    kb_after = load_kb(env / "tests/eval/kb/sample")
    moved = [
        cid
        for case in _cases(SMOKE)
        for cid in case.get("golden_chunk_ids", [])
        if (kb_after.chunk(cid) or kb_before.chunk(cid)).text != kb_before.chunk(cid).text  # type: ignore[union-attr]
    ]
    assert len(moved) > 20  # the positions really moved under most labels

    result = check_paths()
    assert result.exit_code == 0 and not result.issues, [i.format() for i in result.issues[:3]]
    (index,) = result.loaded.values()
    cases = index.suite().cases  # read again from the file, labels resolved as checked
    for case in cases:  # each label now names the chunk with the same text
        written = next(c for c in _cases(SMOKE) if c["id"] == case.id)
        old = [kb_before.chunk(cid).text for cid in written.get("golden_chunk_ids", [])]  # type: ignore[union-attr]
        assert [kb_after.chunk(cid).text for cid in case.golden_chunk_ids] == old  # type: ignore[union-attr]

    after = _retrieval(env)
    assert after == before


def test_deleted_passage_fails_naming_the_case_and_repoint_fixes_it(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = env / "tests/eval/kb/sample/hr/onboarding.md"
    text = doc.read_text(encoding="utf-8")
    passage = re.search(r"入职第一天上午 9:00.*\n", text)
    assert passage is not None
    doc.write_text(text.replace(passage.group(0), "报到安排另行通知。\n"), encoding="utf-8")

    code, out = rag(capsys, "datasets", "check", "--lang", "en")
    assert code == 1, out
    lines = [line for line in out.splitlines() if "passage label" in line]
    assert len(lines) == 1, out
    line = lines[0]
    assert "smoke-002" in line and "golden_chunk_ids[0]" in line
    assert 'hr/onboarding.md › 新员工入职指南 › 报到时间与地点: "入职第一天上午 9:00' in line
    assert 'sample:hr/onboarding.md#2 "## 报到时间与地点' not in line  # candidates show bodies
    command = re.search(r"`(rag datasets repoint [^`]+)`", line)
    assert command is not None
    assert command.group(1) == (
        "rag datasets repoint smoke-002 sample:hr/onboarding.md#2 sample:hr/onboarding.md#2"
    )
    # the run refuses the dataset too (exit 2 from the CLI)
    code, out = rag(capsys, "eval", "run", "--suite", "smoke", "--limit", "1", "--quiet")
    assert code == 2 and "smoke-002" in out, out

    code, out = rag(capsys, *command.group(1).split()[1:])
    assert code == 0, out
    new = env / "tests/eval/datasets/smoke_v1.1.jsonl"
    case = next(c for c in _cases(new) if c["id"] == "smoke-002")
    assert case["golden_chunk_ids"] == ["sample:hr/onboarding.md#2"]
    assert case["anchors"]["sample:hr/onboarding.md#2"]["quote"].startswith("报到安排另行通知")
    assert case["version"] == 2
    assert "smoke v1.1" in (env / "tests/eval/datasets/CHANGELOG.md").read_text(encoding="utf-8")
    code, out = rag(capsys, "datasets", "check", str(new))
    assert code == 0, out


@pytest.mark.parametrize("max_chars", [120, 900])
def test_rechunking_keeps_every_label(
    env: Path, monkeypatch: pytest.MonkeyPatch, max_chars: int
) -> None:
    kb_before = load_kb(KB)
    monkeypatch.setattr(kbmod, "MAX_CHARS", max_chars)
    kb_after = load_kb(env / "tests/eval/kb/sample")
    assert len(kb_after.chunks) != len(kb_before.chunks) or max_chars > 400
    result = check_paths()
    assert not [i for i in result.errors if i.code == "passage-gone"]
    (index,) = result.loaded.values()
    cases = index.suite().cases  # read again from the file, labels resolved as checked
    split = 0
    for case in cases:
        written = next(c for c in _cases(SMOKE) if c["id"] == case.id)
        for cid in written.get("golden_chunk_ids", []):
            passage = normal(body_of(kb_before.chunk(cid)))  # type: ignore[arg-type]
            now = [c for c in case.golden_chunk_ids if c.split("#")[0] == cid.split("#")[0]]
            joined = "".join(normal(body_of(kb_after.chunk(c))) for c in now)  # type: ignore[arg-type]
            assert passage in joined, (case.id, cid)
        split += len(case.golden_chunk_ids) > len(written.get("golden_chunk_ids", []))
    if max_chars < 400:
        assert split  # some passages are now cut in pieces: every piece is labelled


def test_the_sheet_shows_each_golden_passage_and_reads_back_the_same_file(tmp_path: Path) -> None:
    from app.eval.datasets.sheets import (
        COLUMNS,
        export_rows,
        read_sheet,
        rows_to_jsonl,
        write_sheet,
    )

    suite = load_suite("smoke")
    rows = export_rows(suite)
    header = rows[0]
    shown = header.index("golden_passages")
    first = dict(zip(header, rows[1], strict=True))
    assert first["id"] == "smoke-001"
    assert rows[1][shown] == (
        "sample:hr/onboarding.md#1: 新员工入职指南 › 入职需携带的材料 › "
        "新员工入职当天需携带：身份证原件及复印件 2 份、最…"
    )
    write_sheet(rows, tmp_path / "smoke.csv", "csv")
    cases, letters, issues = read_sheet(tmp_path / "smoke.csv")
    assert not issues and "golden_passages" not in letters and "anchors" in COLUMNS
    text, problems = rows_to_jsonl(
        cases, suite="smoke", file="smoke.csv", kb=load_kb(KB), letters=letters
    )
    assert not [p for p in problems if p.severity == "error"]
    assert text == SMOKE.read_text(encoding="utf-8")  # the anchors come back byte for byte
