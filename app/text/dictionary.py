"""jieba's prefix dictionary read from a compact per-checkout file (issue 14: peak RSS).

jieba keeps its whole prefix dictionary in one Python dict (≈ 500,000 words and word
prefixes → their frequency: ≈ 65–70 MB of memory and ≈ 1.2–1.5 s of CPU per process, from
its own cache file or from ``dict.txt``). Segmenting a text reads only the entries of the
text's own substrings, so :func:`install` gives jieba's tokenizer a read-only mapping
(:class:`CompactFreq`) that looks each entry up in an SQLite file instead, and keeps what
it has looked up (a bounded memo). jieba's own algorithms run unchanged on the same
numbers: the DAG, the route, HMM for unknown words and the search-mode sub-words are the
same (tested against jieba's dict on the knowledge base and the suites).

The file is a pure function of jieba's dictionary (built from jieba's own
``gen_pfdict``: the same entries and total), so like the embedding vectors it is kept per
checkout, not per ``$RAG_CACHE_DIR``: ``$RAG_DICT_CACHE_DIR``, else ``.cache/dictionaries``
of the checkout the code runs from. Its name carries the format version and the
dictionary file's path, size and mtime (a new jieba or dictionary is a new file). It is
written once to a temporary file and renamed (concurrent builders cannot leave a partial
file under the final name). Any OS or SQLite error: :func:`install` returns False and the
caller falls back to jieba's own dictionary.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from app.safe_io import replacing

FORMAT = "1"
#: the format of the part-of-speech tag file (:func:`posseg`)
TAGS_FORMAT = "1"
#: memo entries kept per process before it is emptied (a few MB; a text's look-ups repeat
#: within a text, and the common words repeat across texts)
MEMO_MAX = 262_144
_ABSENT = -1  # memo value of a string that is not in the dictionary (frequencies are ≥ 0)


def folder() -> Path:
    env = os.environ.get("RAG_DICT_CACHE_DIR")
    return (
        Path(env).resolve()
        if env
        else Path(__file__).resolve().parents[2] / ".cache" / "dictionaries"
    )


def file_name(dictionary: str, kind: str = "") -> str:
    """The compact file of ``dictionary``: its prefix dictionary, or with ``kind="tags"``
    its part-of-speech tags."""
    st = os.stat(dictionary)
    version = f"tags format {TAGS_FORMAT}" if kind else f"format {FORMAT}"
    key = f"{version}\n{os.path.abspath(dictionary)} {st.st_size} {st.st_mtime_ns}"
    return (
        f"jieba-{kind + '-' if kind else ''}{hashlib.sha256(key.encode()).hexdigest()[:16]}.sqlite"
    )


class _ReadOnlyFile:
    """A read-only SQLite file with a ``meta`` table that says it is ``complete``."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._pid = -1
        self._con: sqlite3.Connection | None = None
        if self._query("SELECT v FROM meta WHERE k = 'complete'", ()) != 1:
            raise sqlite3.DatabaseError(f"{path}: not a complete dictionary file")

    def _query(self, sql: str, args: tuple[str, ...]) -> Any:
        if self._con is None or self._pid != os.getpid():  # a forked child opens its own
            self._con = sqlite3.connect(
                f"file:{self._path}?mode=ro", uri=True, check_same_thread=False
            )
            self._pid = os.getpid()
        row = self._con.execute(sql, args).fetchone()
        return None if row is None else row[0]


class CompactFreq(_ReadOnlyFile):
    """jieba's ``FREQ`` read-only mapping (``in``, ``[]``, ``get``) over the SQLite file;
    :meth:`__setitem__` (jieba's ``add_word``) keeps the word in this process only."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._memo: dict[str, int] = {}
        self._added: dict[str, int] = {}
        self.total = int(self._query("SELECT v FROM meta WHERE k = 'total'", ()) or 0)

    def _freq(self, key: str) -> int:
        memo = self._memo
        value = memo.get(key)
        if value is None:
            value = self._added.get(key)
            if value is None:
                found = self._query("SELECT f FROM freq WHERE w = ?", (key,))
                value = _ABSENT if found is None else int(found)
            if len(memo) >= MEMO_MAX:
                memo.clear()
            memo[key] = value
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._freq(key)
        return default if value == _ABSENT else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._freq(key) != _ABSENT

    def __getitem__(self, key: str) -> int:
        value = self._freq(key)
        if value == _ABSENT:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: int) -> None:
        self._added[key] = value
        self._memo.pop(key, None)


def build(path: Path, entries: Iterable[tuple[str, int]], total: int) -> None:
    """Write the dictionary file at ``path`` (:func:`app.safe_io.replacing`: a temporary
    file, fsynced and renamed into place)."""
    with replacing(path) as tmp:
        con = sqlite3.connect(tmp)
        try:
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")  # one fsync when complete (replacing)
            con.execute("CREATE TABLE freq (w TEXT PRIMARY KEY, f INTEGER NOT NULL) WITHOUT ROWID")
            con.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v) WITHOUT ROWID")
            con.executemany("INSERT INTO freq VALUES (?, ?)", sorted(entries))
            con.execute("INSERT INTO meta VALUES ('total', ?)", (total,))
            con.execute("INSERT INTO meta VALUES ('complete', 1)")
            con.commit()
        finally:
            con.close()


def install(jieba: Any) -> bool:
    """Give ``jieba.dt`` the compact dictionary (built first if this checkout has none);
    False (nothing changed) when it cannot: then call ``jieba.initialize()``."""
    tokenizer = jieba.dt
    if tokenizer.initialized or tokenizer.dictionary != jieba.DEFAULT_DICT:
        return False
    try:
        dictionary = os.path.join(os.path.dirname(jieba.__file__), jieba.DEFAULT_DICT_NAME)
        path = folder() / file_name(dictionary)
        try:
            compact = CompactFreq(path)
        except sqlite3.DatabaseError:  # none yet (or not a whole one): build it once
            path.parent.mkdir(parents=True, exist_ok=True)  # (an OSError before the parse)
            freq, total = jieba.Tokenizer.gen_pfdict(tokenizer.get_dict_file())
            build(path, freq.items(), total)
            del freq
            compact = CompactFreq(path)
    except (OSError, sqlite3.Error, ValueError):
        return False
    with tokenizer.lock:
        tokenizer.FREQ = compact
        tokenizer.total = compact.total
        tokenizer.initialized = True
    return True


# --- part-of-speech tags (jieba.posseg) --------------------------------------------------
#
# ``import jieba.posseg`` reads the whole dictionary into a second dict, word → tag (≈ 350,000
# entries: ≈ 50 MB of memory per process, for the few words of the multi-turn histories it
# tags). posseg reads that table only with ``.get(word, "x")`` (and ``.update`` for a user
# dictionary), so :func:`posseg` gives it :class:`CompactTags` over a file of the same
# entries instead: the same tags, the same words.


class CompactTags(_ReadOnlyFile):
    """``jieba.posseg``'s ``word_tag_tab`` over the tags file: ``get``, ``in``, ``[]``;
    :meth:`update` (a user dictionary's tags) keeps them in this process only."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._memo: dict[str, str | None] = {}
        self._added: dict[str, str] = {}

    def _tag(self, key: str) -> str | None:
        memo = self._memo
        if key in memo:
            return memo[key]
        value = self._added.get(key)
        if value is None:
            found = self._query("SELECT t FROM tag WHERE w = ?", (key,))
            value = None if found is None else str(found)
        if len(memo) >= MEMO_MAX:
            memo.clear()
        memo[key] = value
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._tag(key)
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._tag(key) is not None

    def __getitem__(self, key: str) -> str:
        value = self._tag(key)
        if value is None:
            raise KeyError(key)
        return value

    def update(self, tags: Mapping[str, str]) -> None:
        self._added.update(tags)
        for key in tags:
            self._memo.pop(key, None)


def _tag_lines(source: IO[bytes]) -> Iterator[tuple[str, str]]:
    """``(word, tag)`` of each line of a jieba dictionary, as posseg's ``load_word_tag``
    reads them (a later line of the same word wins: ``INSERT OR REPLACE``)."""
    with source:
        for line in source:
            text = line.strip().decode("utf-8")
            if text:
                word, _, tag = text.split(" ")
                yield word, tag


def build_tags(path: Path, source: IO[bytes]) -> None:
    """Write the tags file at ``path`` from the dictionary ``source`` (streamed: the
    dictionary is never in memory)."""
    with replacing(path) as tmp:
        con = sqlite3.connect(tmp)
        try:
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            con.execute("CREATE TABLE tag (w TEXT PRIMARY KEY, t TEXT NOT NULL) WITHOUT ROWID")
            con.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v) WITHOUT ROWID")
            con.executemany("INSERT OR REPLACE INTO tag VALUES (?, ?)", _tag_lines(source))
            con.execute("INSERT INTO meta VALUES ('complete', 1)")
            con.commit()
        finally:
            con.close()


def posseg(jieba: Any) -> ModuleType:
    """``jieba.posseg``, imported with its tag table read from the compact tags file
    (built first if this checkout has none). When jieba's tokenizer is not on its default
    dictionary, or the file cannot be made or read, posseg is imported as jieba does it."""
    import importlib
    import io
    import sys

    if "jieba.posseg" in sys.modules:
        return sys.modules["jieba.posseg"]
    tokenizer = jieba.dt
    tags: CompactTags | None = None
    if tokenizer.dictionary == jieba.DEFAULT_DICT:
        try:
            dictionary = os.path.join(os.path.dirname(jieba.__file__), jieba.DEFAULT_DICT_NAME)
            path = folder() / file_name(dictionary, "tags")
            try:
                tags = CompactTags(path)
            except sqlite3.DatabaseError:  # none yet (or not a whole one): build it once
                path.parent.mkdir(parents=True, exist_ok=True)
                build_tags(path, tokenizer.get_dict_file())
                tags = CompactTags(path)
        except (OSError, sqlite3.Error, ValueError):
            tags = None
    if tags is None:
        return importlib.import_module("jieba.posseg")
    # posseg builds its module's tokenizer at import, reading the dictionary's tags: it reads
    # an empty file instead, and is given the compact table
    tokenizer.get_dict_file = lambda: io.BytesIO(b"")
    try:
        module = importlib.import_module("jieba.posseg")
    finally:
        del tokenizer.get_dict_file
    module.dt.word_tag_tab = tags
    return module
