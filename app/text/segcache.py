"""Results kept per machine, so a warm process need not load a big table (issue 14).

Loading jieba's dictionary costs ≈ 1.2 s of CPU and ≈ 65 MB of memory per process, even
from jieba's own cache file; loading a BPE rank table for token counting ≈ 0.3 s and
≈ 30 MB. Both compute pure functions of their input, so their answers are kept here:

* :class:`Kept` — one ``marshal`` file of str → value, its name carrying a fingerprint of
  everything the answers depend on (a change is a new file, never a stale answer). Read
  once per process (anything that is not a dict with keys and values of the expected
  types is ignored); new entries are merged into the file at exit, written to a temporary
  file and renamed (atomic: concurrent writers may lose entries, never corrupt the file).
  Bounded (:data:`MAX_ENTRIES` entries, keys of at most :data:`MAX_KEY` characters); a
  folder that cannot be written only means no cache.
* :func:`lookup` / :func:`store` — the analyser's tokens of one CJK run
  (:func:`app.text.analyser._cjk_tokens`, query or document side), keyed by analyser
  version, stop words and jieba's dictionary file: a process whose runs were all seen
  before (the same knowledge base, the same suite) never loads jieba.

The folder is the one jieba caches in: ``$RAG_CACHE_DIR/jieba``, else the system temp
folder (app.text is the ground floor: it reads the variable rather than import app.paths).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.util
import marshal
import os
import tempfile
from collections.abc import Callable
from typing import Any

MAX_KEY = 129  # one side letter + a run of 128 characters
MAX_ENTRIES = 100_000


def folder() -> str:
    env = os.environ.get("RAG_CACHE_DIR")
    return os.path.join(env, "jieba") if env else tempfile.gettempdir()


class Kept:
    """A per-machine map str → value in ``folder()/<name>``, values checked by ``valid``."""

    def __init__(self, name: str, valid: Callable[[Any], bool]) -> None:
        self.name = name
        self.valid = valid
        self._entries: dict[str, Any] | None = None
        self._new: dict[str, Any] = {}
        self._path = ""

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            self._path = os.path.join(folder(), self.name)
            self._entries = self._read()
            atexit.register(self.flush)
        return self._entries

    def _read(self) -> dict[str, Any]:
        try:
            with open(self._path, "rb") as fh:
                # one read, then parse: marshal.load on the file object reads it piece by
                # piece through Python calls (≈ 15 ms instead of ≈ 2 ms for 100 KB)
                data = marshal.loads(fh.read())
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if isinstance(data, dict) and all(
            isinstance(k, str) and self.valid(v) for k, v in data.items()
        ):
            return data
        return {}

    def get(self, key: str) -> Any:
        return self._load().get(key)

    def put(self, key: str, value: Any) -> None:
        entries = self._load()
        if len(key) > MAX_KEY or len(entries) >= MAX_ENTRIES:
            return
        entries[key] = value
        self._new[key] = value

    def flush(self) -> None:
        """Merge this process's new entries into the file; an OS error: no cache."""
        if not self._new:
            return
        try:
            merged = self._read()
            for key, value in self._new.items():
                if len(merged) >= MAX_ENTRIES:
                    break
                merged[key] = value
            from pathlib import Path

            from app.safe_io import atomic_write_bytes  # fsynced, one rename

            atomic_write_bytes(Path(self._path), marshal.dumps(merged))
            self._new.clear()
        except OSError:
            pass


def _is_tokens(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(t, str) for t in value)


@functools.cache
def _segments_name(analyser_version: str, stopwords: frozenset[str]) -> str:
    h = hashlib.sha256(f"analyser {analyser_version}\n".encode())
    h.update("\n".join(sorted(stopwords)).encode())
    spec = importlib.util.find_spec("jieba")
    origin = spec.origin if spec is not None else None
    if origin:
        dictionary = os.path.join(os.path.dirname(origin), "dict.txt")
        try:
            st = os.stat(dictionary)
            h.update(f"\n{dictionary} {st.st_size} {st.st_mtime_ns}".encode())
        except OSError:
            h.update(b"\nno dictionary")
    return f"rag-segments-{h.hexdigest()[:16]}"


_segments: Kept | None = None


def _segments_for(analyser_version: str, stopwords: frozenset[str]) -> Kept:
    global _segments
    if _segments is None or _segments.name != _segments_name(analyser_version, stopwords):
        _segments = Kept(_segments_name(analyser_version, stopwords), _is_tokens)
    return _segments


def lookup(
    run: str, query: bool, analyser_version: str, stopwords: frozenset[str]
) -> tuple[str, ...] | None:
    """The kept tokens of ``run`` on that side, or None (then compute and :func:`store`)."""
    tokens: tuple[str, ...] | None = _segments_for(analyser_version, stopwords).get(
        ("q" if query else "d") + run
    )
    return tokens


def store(run: str, query: bool, tokens: tuple[str, ...]) -> None:
    if _segments is not None:
        _segments.put(("q" if query else "d") + run, tokens)
