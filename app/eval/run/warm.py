"""The pipeline-level warm cache (issue 14): a rerun whose answers all come from the response
cache skips retrieval and assembly too.

What a case's pipeline answer depends on is hashed into its key:

* the run's **fingerprint** (:func:`fingerprint`, once per process): the source and data
  files of ``app/`` (the viewer excepted), the prompt registry's root, the knowledge base's
  files, the fields the run builds its pipeline configuration from, the installed
  distributions (names and versions), the Python version and the ``RAG_*`` environment
  (names that look like a secret — ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD`` — are left
  out, so no key is ever hashed);
* the **case**'s question, history and reader groups (what :func:`observe_case` passes in).

An entry holds the pipeline's :class:`~app.generation.pipeline.trace.Answer` and the calls it
made (:func:`app.llm.engine.recording`: each call's response-cache key and a digest of the
completion stored there). It is used only when :meth:`app.llm.engine.Engine.replay` finds
every one of those completions in the response cache, unchanged — so a ``--refresh-cache``
that stored a different reply, or a cleared cache, is a miss (the same reply stored again,
however long its call took, is not) — and the engine then counts them
as the cache hits they would have been. The answer comes back as the pipeline would give it
now: a new trace id and time, ``tokens.cached_calls`` = its calls (all cache hits) and the
latency of the lookup; everything else as stored. Nothing is stored or replayed with
``--no-cache`` or ``--refresh-cache``, for a candidate that is not cacheable (the offline
baselines: re-computing is the point) or a call that did not go through the cache, or
after a pipeline error. Log lines the pipeline would print for a case (an injection
warning, invalid citations) are not repeated on a replay.

Entries live in ``pipeline_answers.sqlite3`` beside the response cache file
(``<RAG_CACHE_DIR>/llm/``): clearing that folder clears both. An entry not replayed for
:data:`MAX_AGE_S` (30 days) is removed when a run closes the cache: every code change makes
the old entries unreachable (the code is part of the key), so without that a CI cache kept
across pull requests would only grow.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import sys
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.generation.pipeline.trace import Answer
    from app.llm.engine import Engine
    from app.llm.recording import CallRecord

log = logging.getLogger(__name__)

FORMAT = 1
APP_DIR = Path(__file__).resolve().parents[2]
_SKIP_DIRS = frozenset({"__pycache__", "view"})  # the viewer cannot change an answer
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MAX_AGE_S = 30 * 86_400  # an entry neither stored nor replayed for this long is removed
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key        TEXT PRIMARY KEY,
    created_at REAL NOT NULL,  -- stored or last replayed (time.time())
    entry      TEXT NOT NULL
)
"""


def tree_digest(root: Path, skip_dirs: frozenset[str] = frozenset({"__pycache__"})) -> str:
    """sha256 over every file under ``root`` (relative path + content), in sorted order."""
    h = hashlib.sha256()
    if root.is_file():
        h.update(root.read_bytes())
        return h.hexdigest()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as f:
                h.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _distributions() -> list[str]:
    """The installed distributions' metadata folder names (``name-version.dist-info``)."""
    found: set[str] = set()
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        found.update(n for n in names if n.endswith((".dist-info", ".egg-info")))
    return sorted(found)


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``RAG_*`` variables, without any whose name looks like a secret."""
    env = os.environ if env is None else env
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith("RAG_") and not any(w in k.upper() for w in _SECRET_WORDS)
    }


_CODE: str | None = None


def code_digest() -> str:
    """The digest of ``app/``'s files (once per process)."""
    global _CODE
    if _CODE is None:
        _CODE = tree_digest(APP_DIR, _SKIP_DIRS)
    return _CODE


def fingerprint(*, pipeline_fields: Mapping[str, Any], registry_root: Path, kb_root: Path) -> str:
    """Everything a pipeline answer depends on except the case and the model's replies."""
    doc = {
        "format": FORMAT,
        "python": sys.version,
        "code": code_digest(),
        "distributions": _distributions(),
        "environment": environment(),
        "pipeline": dict(pipeline_fields),
        "registry": tree_digest(registry_root),
        "kb": tree_digest(kb_root),
    }
    blob = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def case_key(
    run: str,
    question: str,
    history: Sequence[tuple[str, str]],
    acl: Sequence[str],
    sample_index: int = 0,
) -> str:
    doc: dict[str, Any] = {
        "run": run,
        "question": question,
        "history": [list(t) for t in history],
        "acl": list(acl),
    }
    if sample_index:  # a --repeat sample: never sample 0's replay (sample 0 keeps its key)
        doc["sample"] = sample_index
    blob = json.dumps(doc, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class WarmCache:
    """Answers (and per-run facts) by key, verified against the engine's response cache."""

    def __init__(self, engine: Engine, run: str, path: Path) -> None:
        self.engine = engine
        self.run = run
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self.hits = 0
        self.stored = 0

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.execute("PRAGMA busy_timeout = 30000")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(_SCHEMA)
            except (OSError, sqlite3.Error) as exc:  # no warm cache, never a failed run
                log.warning("pipeline warm cache %s unavailable: %s", self.path, exc)
                return None
            self._conn = conn
            weakref.finalize(self, conn.close)
        return self._conn

    def _get(self, key: str) -> dict[str, Any] | None:
        conn = self._connect()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT entry FROM entries WHERE key = ?", (key,)).fetchone()
            data = json.loads(row[0]) if row is not None else None
        except (sqlite3.Error, ValueError) as exc:
            log.warning("pipeline warm cache: unreadable entry %s: %s", key[:12], exc)
            return None
        return data if isinstance(data, dict) else None

    def _put(self, key: str, entry: dict[str, Any]) -> None:
        conn = self._connect()
        if conn is None:
            return
        blob = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        try:
            conn.execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (key, time.time(), blob)
            )
        except sqlite3.Error as exc:
            log.warning("pipeline warm cache: could not store %s: %s", key[:12], exc)

    # -- per-run facts (what the pipeline object would say) ------------------------------
    def fact(self, name: str) -> Any:
        data = self._get(f"{self.run}:{name}")
        return None if data is None else data.get("value")

    def set_fact(self, name: str, value: Any) -> None:
        self._put(f"{self.run}:{name}", {"value": value})

    # -- answers ---------------------------------------------------------------------------
    def answer(self, key: str) -> Answer | None:
        """The stored answer for ``key`` as the pipeline would return it now, or None."""
        from app.generation.pipeline.trace import Answer

        started = time.perf_counter()
        data = self._get(key)
        if data is None or not isinstance(data.get("calls"), list):
            return None
        calls: list[CallRecord] = [
            (str(c[0]), str(c[1])) if isinstance(c, list) and len(c) == 2 else None
            for c in data["calls"]
        ]
        try:
            answer = Answer.model_validate(data.get("answer"))
        except ValueError:
            return None
        if self.engine.replay(calls) is None:
            return None
        trace = answer.trace
        trace.trace_id = uuid.uuid4().hex[:16]
        trace.created_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        trace.tokens.cached_calls = len(calls)  # every call was a cache hit
        trace.latency_ms = round((time.perf_counter() - started) * 1000, 2)
        self.hits += 1
        self._touch(key)
        return answer

    def _touch(self, key: str) -> None:
        """Mark ``key`` used now (its age counts from its last replay)."""
        conn = self._connect()
        if conn is None:
            return
        try:
            conn.execute("UPDATE entries SET created_at = ? WHERE key = ?", (time.time(), key))
        except sqlite3.Error as exc:
            log.warning("pipeline warm cache: could not mark %s used: %s", key[:12], exc)

    def prune(self, max_age_s: float = MAX_AGE_S) -> int:
        """Remove the entries neither stored nor replayed for ``max_age_s``; how many."""
        conn = self._connect()
        if conn is None:
            return 0
        try:
            cur = conn.execute(
                "DELETE FROM entries WHERE created_at < ?", (time.time() - max_age_s,)
            )
        except sqlite3.Error as exc:
            log.warning("pipeline warm cache: could not prune: %s", exc)
            return 0
        return cur.rowcount

    def store(self, key: str, answer: Answer, calls: Sequence[CallRecord]) -> None:
        """Keep ``answer`` if every call it made went through the response cache."""
        if any(c is None for c in calls) or len(calls) != answer.trace.tokens.llm_calls:
            return
        entry = {"answer": answer.model_dump(mode="json"), "calls": [list(c) for c in calls if c]}
        self._put(key, entry)
        self.stored += 1

    def close(self) -> None:
        if self._conn is not None:
            self.prune()
            self._conn.close()
            self._conn = None
