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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.safe_io import replacing

FORMAT = "1"
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


def file_name(dictionary: str) -> str:
    st = os.stat(dictionary)
    key = f"format {FORMAT}\n{os.path.abspath(dictionary)} {st.st_size} {st.st_mtime_ns}"
    return f"jieba-{hashlib.sha256(key.encode()).hexdigest()[:16]}.sqlite"


class CompactFreq:
    """jieba's ``FREQ`` read-only mapping (``in``, ``[]``, ``get``) over the SQLite file;
    :meth:`__setitem__` (jieba's ``add_word``) keeps the word in this process only."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._pid = -1
        self._con: sqlite3.Connection | None = None
        self._memo: dict[str, int] = {}
        self._added: dict[str, int] = {}
        self.total = int(self._query("SELECT v FROM meta WHERE k = 'total'", ()) or 0)
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
