"""jieba's prefix dictionary from the compact file (app.text.dictionary): the same words
as jieba's own dictionary gives, on the knowledge base and every suite question."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from app.paths import kb_dir
from app.text import dictionary, ensure_jieba
from tests.support.suites import suite_questions


def _jieba() -> Any:
    return ensure_jieba()  # the module; jieba.dt carries whatever install() gave it


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A tokenizer on jieba's own dictionary (its dict of every word and prefix)."""
    jieba = _jieba()
    ref = jieba.Tokenizer()
    ref.tmp_dir = str(tmp_path_factory.mktemp("jieba-own"))
    ref.initialize()
    assert isinstance(ref.FREQ, dict) and len(ref.FREQ) > 300_000
    return ref


@pytest.fixture(scope="module")
def dict_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dict")


@pytest.fixture(scope="module")
def compact(dict_folder: Path) -> Any:
    """A tokenizer on a compact file built in a fresh folder."""
    jieba = _jieba()
    mp = pytest.MonkeyPatch()
    mp.setenv("RAG_DICT_CACHE_DIR", str(dict_folder))
    fresh = jieba.Tokenizer()
    mp.setattr(jieba, "dt", fresh)
    try:
        assert dictionary.install(jieba) is True
    finally:
        mp.undo()
    assert isinstance(fresh.FREQ, dictionary.CompactFreq)
    assert [p.name for p in dict_folder.iterdir()] == [
        dictionary.file_name(str(Path(jieba.__file__).parent / "dict.txt"))
    ]
    return fresh


def _texts() -> list[str]:
    docs = [p.read_text(encoding="utf-8") for p in sorted(kb_dir().rglob("*.md"))]
    assert len(docs) > 20
    return list(dict.fromkeys(docs + suite_questions()))


def test_the_same_words_as_jiebas_own_dictionary(reference: Any, compact: Any) -> None:
    assert compact.total == reference.total
    texts = _texts()
    for text in texts:
        assert list(compact.cut(text)) == list(reference.cut(text)), text[:40]
        assert list(compact.cut_for_search(text)) == list(reference.cut_for_search(text))
        assert list(compact.cut(text, HMM=False)) == list(reference.cut(text, HMM=False))


def test_entries_read_as_jiebas_dict(reference: Any, compact: Any) -> None:
    word, absent = "报销", "年假年假年假"
    prefixes = [k for k, v in reference.FREQ.items() if v == 0][:50]  # a prefix, not a word
    freq = compact.FREQ
    for key in (word, "年假", "的", absent, "x", "", *prefixes):
        assert (key in freq) == (key in reference.FREQ), key
        assert freq.get(key) == reference.FREQ.get(key), key
        assert freq.get(key, 7) == reference.FREQ.get(key, 7), key
    assert freq[word] == reference.FREQ[word] > 0
    with pytest.raises(KeyError):
        freq[absent]
    # add_word keeps the word in this process (and its prefixes, as jieba's dict does)
    compact.add_word("年假年假年假", 5)
    assert freq["年假年假年假"] == 5 and freq["年假年假年"] == 0
    assert "年假年假年假" in compact.lcut("年假年假年假")


def test_a_broken_file_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jieba = _jieba()
    monkeypatch.setenv("RAG_DICT_CACHE_DIR", str(tmp_path))
    path = tmp_path / dictionary.file_name(str(Path(jieba.__file__).parent / "dict.txt"))
    path.write_bytes(b"not a database")
    with pytest.raises(sqlite3.DatabaseError):
        dictionary.CompactFreq(path)
    fresh = jieba.Tokenizer()
    monkeypatch.setattr(jieba, "dt", fresh)
    assert dictionary.install(jieba) is True
    assert fresh.lcut("公司的年假有多少天？") == [
        "公司",
        "的",
        "年",
        "假",
        "有",
        "多少",
        "天",
        "？",
    ]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_an_unwritable_folder_leaves_jieba_to_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jieba = _jieba()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("RAG_DICT_CACHE_DIR", str(blocker / "sub"))
    fresh = jieba.Tokenizer()
    monkeypatch.setattr(jieba, "dt", fresh)
    assert dictionary.install(jieba) is False
    assert fresh.initialized is False and fresh.FREQ == {}


def test_a_process_never_builds_jiebas_own_dict(
    tmp_path: Path, compact: Any, dict_folder: Path
) -> None:
    code = (
        "from app.text import tokenize, ensure_jieba\n"
        "assert tokenize('公司的年假有多少天？') == ['年假', '天']\n"
        "print(type(ensure_jieba().dt.FREQ).__name__)"
    )
    out = _fresh_process(code, tmp_path, dict_folder)
    assert out.stdout.split() == ["CompactFreq"]
    assert not (tmp_path / "jieba" / "jieba.cache").exists()  # jieba's own: never built


def test_posseg_tags_as_jiebas_own_table(reference: Any, compact: Any, tmp_path: Path) -> None:
    """The compact tags file tags every word as posseg's own table (jieba's ``dict.txt``
    read by its ``load_word_tag``) does: the same (word, flag) pairs on every text."""
    import importlib

    jieba = _jieba()
    own = importlib.import_module("jieba.posseg").POSTokenizer(reference)
    assert isinstance(own.word_tag_tab, dict) and len(own.word_tag_tab) > 300_000
    path = tmp_path / "tags.sqlite"
    dictionary.build_tags(path, reference.get_dict_file())
    tags = dictionary.CompactTags(path)
    ours = importlib.import_module("jieba.posseg").POSTokenizer.__new__(type(own))
    ours.tokenizer, ours.word_tag_tab = compact, tags
    for word in ("北京", "华为", "报销", "的", "年假年假年假", ""):
        assert tags.get(word, "x") == own.word_tag_tab.get(word, "x"), word
        assert (word in tags) == (word in own.word_tag_tab), word
    history = ["张三在北京的华为公司工作，李四呢？", "王经理说上海分公司的报销流程变了"]
    for text in [*history, *_texts()[:150]]:
        assert [tuple(p) for p in ours.cut(text)] == [tuple(p) for p in own.cut(text)], text[:40]
    tags.update({"年假年假年假": "nz"})  # a user dictionary's tag: this process only
    assert tags["年假年假年假"] == "nz"
    del jieba


def test_multi_turn_names_never_load_posseg_own_table(tmp_path: Path, dict_folder: Path) -> None:
    """The entity line of a multi-turn rewrite tags the history with posseg: a fresh process
    doing that reads the compact tags file, not jieba's ≈ 350,000-entry dict (≈ 50 MB)."""
    code = (
        "import sys, jieba\n"
        "from app.generation.pipeline.rewrite import _zh_names\n"
        "names = _zh_names('张三在北京的华为公司工作，李四呢？')\n"
        "table = sys.modules['jieba.posseg'].dt.word_tag_tab\n"
        "print(type(table).__name__, '|'.join(names))"
    )
    out = _fresh_process(code, tmp_path, dict_folder)
    kind, names = out.stdout.split()
    assert kind == "CompactTags"
    assert set(names.split("|")) >= {"张三", "北京", "李四"}


def _fresh_process(code: str, tmp_path: Path, dict_folder: Path) -> Any:
    """``python -c code`` in a new process with its own cache folders; it must exit 0."""
    import os
    import subprocess

    env = {**os.environ, "RAG_CACHE_DIR": str(tmp_path), "RAG_DICT_CACHE_DIR": str(dict_folder)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert out.returncode == 0, out.stderr
    return out
