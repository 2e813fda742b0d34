"""One writer at a time on a datasets folder, across processes: two `rag datasets edit`
servers never lose a saved edit, a version file never lacks its CHANGELOG entry, a released
file is never written, and a FIFO named like a suite is refused instead of read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _datasets_support import DATASETS, kb, line, valid_case
from test_datasets_editor_api import OWN, call
from test_datasets_expert_saves import git

from app.eval.datasets import store
from app.eval.datasets.case import available_suites
from app.eval.datasets.commits import git_saves
from app.eval.datasets.editor import EditorState
from app.eval.datasets.editor_http import make_server
from app.eval.datasets.store import Conflict, Write
from app.eval.datasets.versions import new_version

HERE = Path(__file__).resolve().parent

SERVER = """
import sys
sys.path.insert(0, {here!r})
from pathlib import Path
from _datasets_support import kb
from app.eval.datasets.editor import EditorState
from app.eval.datasets.editor_http import make_server
from app.eval.datasets.editor_http import make_server
server = make_server(EditorState(folder=Path({folder!r}), kb=kb(), lang="en", who="p"))
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "datasets"
    folder.mkdir()
    (folder / "smoke_v1.0.jsonl").write_text(
        line(valid_case("s-1")) + "\n" + line(valid_case("s-2")) + "\n", encoding="utf-8"
    )
    shutil.copy(DATASETS / "CHANGELOG.md", folder / "CHANGELOG.md")
    return folder


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[list[int], Path]]:
    folder = _folder(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SERVER.format(here=str(HERE), folder=str(folder))],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        ports = [int(p.stdout.readline()) for p in procs if p.stdout is not None]
        yield ports, folder
    finally:
        for p in procs:
            p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()


def _race(ports: tuple[int, int], n: int) -> dict[str, tuple[int, dict[str, object]]]:
    """Both servers save the page loaded from the first at once, each a different case."""
    loaded = call(ports[0], "GET", "/api/suite?name=smoke")[1]
    gate = threading.Barrier(2)
    answers: dict[str, tuple[int, dict[str, object]]] = {}

    def save(port: int, index: int, mark: str) -> None:
        cases = json.loads(json.dumps(loaded["cases"]))
        cases[index]["golden_answer"] += f" {mark}"
        body = {"suite": "smoke", "cases": cases, "sha256": loaded["sha256"], "note": mark}
        gate.wait()
        answers[mark] = call(port, "POST", "/api/save", body, **OWN)

    threads = [
        threading.Thread(target=save, args=(ports[0], 0, f"[{n}a]")),
        threading.Thread(target=save, args=(ports[1], 1, f"[{n}b]")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_two_editor_processes_never_lose_a_saved_edit(
    two_servers: tuple[list[int], Path],
) -> None:
    (a, b), folder = two_servers
    saved: list[str] = []
    refused = 0
    for n in range(30):
        for mark, (status, out) in _race((a, b), n).items():
            if status == 200 and out["saved"]:
                saved.append(mark)
                continue
            assert status == 409, out  # the loser is told, never silently dropped
            assert "reload" in str(out["error"]), out
            refused += 1
    newest = available_suites(folder)["smoke"][-1][1].read_text(encoding="utf-8")
    missing = [m for m in saved if m not in newest]
    assert missing == [], f"answered 'saved' but not in {newest!r}"
    assert len(saved) >= 30 and len(saved) + refused == 60
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert [m for m in saved if f"- {m}" not in log] == []  # every note in the CHANGELOG


def test_a_fifo_named_like_a_suite_is_refused_not_read(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    os.mkfifo(folder / "smoke_v1.1.jsonl")
    server = make_server(EditorState(folder=folder, kb=kb(), lang="en", who="t"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        status, out = call(port, "GET", "/api/suite?name=smoke")  # 10 s client timeout
        assert status == 422 and "FIFO" in out["error"] and "smoke_v1.1.jsonl" in out["error"]
        body = {"suite": "smoke", "cases": [valid_case("s-1")], "sha256": "0" * 64, "note": "x"}
        status, out = call(port, "POST", "/api/save", body, **OWN)
        assert status == 422 and "FIFO" in out["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_draft_committed_on_the_base_branch_is_released(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    folder = root / "datasets"
    folder.mkdir(parents=True)
    (folder / "smoke_v1.0.jsonl").write_text(line(valid_case("s-1")) + "\n", encoding="utf-8")
    shutil.copy(DATASETS / "CHANGELOG.md", folder / "CHANGELOG.md")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release smoke v1.0")
    saves = git_saves(folder)
    assert saves is not None
    saves.set_expert("张三", "zhangsan@x.org")
    state = EditorState(folder=folder, kb=kb(), lang="en", git=saves)
    loaded = state.load("smoke")
    first = state.save("smoke", loaded["cases"] + [valid_case("s-2")], loaded["sha256"], "s-2")
    assert first["file"] == "smoke_v1.1.jsonl"
    # the change is merged: the base branch now has the draft the editor created
    git(root, "switch", "-q", "main")
    git(root, "merge", "-q", "--ff-only", first["commit"]["branch"])
    released = (folder / "smoke_v1.1.jsonl").read_bytes()
    loaded = state.load("smoke")
    assert loaded["released"] is True
    again = state.save("smoke", loaded["cases"] + [valid_case("s-3")], loaded["sha256"], "s-3")
    assert again["file"] == "smoke_v1.2.jsonl"
    assert (folder / "smoke_v1.1.jsonl").read_bytes() == released  # never written again


def test_a_writer_killed_mid_save_is_finished_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path)
    real = os.replace

    def die_after_the_journal(src: object, dst: object) -> None:
        real(src, dst)  # type: ignore[arg-type]
        if str(dst).endswith(store.JOURNAL):
            raise KeyboardInterrupt  # killed between the decision and the renames

    monkeypatch.setattr(store.os, "replace", die_after_the_journal)
    with pytest.raises(KeyboardInterrupt):
        new_version("smoke", root=folder, who="t", note="kill me")
    monkeypatch.setattr(store.os, "replace", real)
    assert (folder / store.JOURNAL).exists()  # half-done: neither file is there yet
    assert not (folder / "smoke_v1.1.jsonl").exists()
    with store.locked(folder):  # the next writer finishes it first
        pass
    assert (folder / "smoke_v1.1.jsonl").read_bytes() == (folder / "smoke_v1.0.jsonl").read_bytes()
    assert "## smoke v1.1" in (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert not (folder / store.JOURNAL).exists()
    assert not list(folder.glob(".*.rag-tx"))


def test_compare_and_swap_writes_all_or_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    log = folder / "CHANGELOG.md"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(Conflict, match="changed on disk"):
        store.commit(
            folder,
            [
                Write(folder / "smoke_v1.1.jsonl", b"{}\n", None),
                Write(log, b"# new\n", "0" * 64),  # stale base: nothing at all is written
            ],
        )
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name != store.LOCK} == before
    with pytest.raises(Conflict, match="appeared on disk"):
        store.commit(folder, [Write(folder / "smoke_v1.0.jsonl", b"{}\n", None)])
