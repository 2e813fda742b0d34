"""Atomic writes have one home (app.safe_io): every writer fsyncs before the file appears,
gives it ordinary permissions and leaves no temp file behind.

Pinned disagreements (each failed before the homes were merged): the shadow replay report
was created 0600 (a temp file's mode; reports are 0644 under umask 022) and not fsynced;
the word-frequency dictionary and the segmentation cache were renamed into place unsynced.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app import safe_io


def _ordinary() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


def _no_temp_left(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_shadow_report_is_written_like_every_report(tmp_path: Path, fsyncs: list[int]) -> None:
    from app.ops.shadow import ShadowReport, write_report

    report = ShadowReport(run_id="r1", created_at="2026-12-01T00:00:00Z", source="x", candidate={})
    path = write_report(report, tmp_path / "out")
    assert path.stat().st_mode & 0o777 == _ordinary()
    assert fsyncs
    _no_temp_left(tmp_path / "out")


def test_the_dictionary_is_fsynced_before_it_is_renamed(tmp_path: Path, fsyncs: list[int]) -> None:
    import sqlite3

    from app.text.dictionary import build

    target = tmp_path / "dict.sqlite"
    build(target, [("年假", 3)], 3)
    assert fsyncs
    assert target.stat().st_mode & 0o777 == _ordinary()
    with sqlite3.connect(target) as con:
        assert con.execute("SELECT f FROM freq WHERE w = '年假'").fetchone() == (3,)
    _no_temp_left(tmp_path)


def test_the_segmentation_cache_is_fsynced(
    tmp_path: Path, fsyncs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.text.segcache import Kept

    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    kept = Kept("probe", lambda v: isinstance(v, int))
    kept.put("k", 1)
    kept.flush()
    assert fsyncs
    assert Kept("probe", lambda v: isinstance(v, int)).get("k") == 1
    _no_temp_left(tmp_path / "jieba")


def test_replacing_leaves_the_old_file_on_an_error(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    safe_io.atomic_write_text(target, "old")
    with pytest.raises(RuntimeError), safe_io.replacing(target) as tmp:
        tmp.write_text("half", encoding="utf-8")
        raise RuntimeError("killed")
    assert target.read_text(encoding="utf-8") == "old"
    _no_temp_left(tmp_path)


def test_create_new_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "labels.jsonl"
    safe_io.create_new_bytes(target, b"one\n")
    with pytest.raises(FileExistsError):
        safe_io.create_new_bytes(target, b"two\n")
    assert target.read_bytes() == b"one\n"
    _no_temp_left(tmp_path)


def test_a_writer_sweeps_only_its_own_stale_temp_files(tmp_path: Path) -> None:
    # a dead writer's temp file (pid 2**22 + 1 is above Linux's pid_max default) of this
    # target is removed; another program's look-alike in a shared folder is not
    dead = 2**22 + 1
    mine = tmp_path / f".f.txt.{dead}.abcd1234.tmp"
    theirs = tmp_path / f".other.{dead}.abcd1234.tmp"
    mine.write_text("x")
    theirs.write_text("x")
    safe_io.atomic_write_text(tmp_path / "f.txt", "new")
    assert not mine.exists() and theirs.exists()
