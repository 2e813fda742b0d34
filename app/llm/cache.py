"""A content-addressed response cache in SQLite (WAL) under ``app.paths.cache_dir()``.

Key = sha256 over a canonical JSON of: provider family, model, base_url,
``request.cache_payload()`` (messages, system, sampling parameters, variables, metadata),
the sample index and the namespace (``request.purpose``: generation, judge, …). So ``n``
judge samples are ``n`` entries, a changed prompt or model misses, and no secret can be
part of a key (keys are never passed here). Only successful completions are stored.
A hit comes back with ``cached=True`` and the *original* ``cost_usd`` (what the call is
worth at list price, ``None`` when the model is unpriced): a case's cost in a report is then
the same whether its calls were paid now, earlier, or by a run that was killed mid-case.
Money actually spent by this process is ``EngineStats.cost_usd``, which counts only calls
that were not served from the cache.

Concurrency: WAL journal, ``busy_timeout`` and one ``INSERT OR REPLACE`` per entry, so two
processes writing at once both land every row; each process opens its own connection.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from app import paths
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion, Usage

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key           TEXT PRIMARY KEY,
    namespace     TEXT NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    sample_index  INTEGER NOT NULL,
    prompt_version TEXT,
    created_at    REAL NOT NULL,
    completion    TEXT NOT NULL
)
"""


def default_cache_path() -> Path:
    return paths.cache_dir() / "llm" / "responses.sqlite3"


def cache_key(spec: ProviderSpec, request: ChatRequest, sample_index: int) -> str:
    """The content address of one call (hex sha256)."""
    doc = {
        "format": CACHE_FORMAT,
        "family": spec.family,
        "model": spec.model,
        "base_url": spec.base_url,
        "namespace": request.purpose,
        "sample_index": sample_index,
        "request": request.cache_payload(),
    }
    blob = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _encode(completion: Completion) -> str:
    return json.dumps(asdict(completion), ensure_ascii=False, separators=(",", ":"))


def _decode(blob: str) -> Completion:
    data: dict[str, Any] = json.loads(blob)
    usage = Usage(**data.pop("usage"))
    return Completion(usage=usage, **data)


class ResponseCache:
    """Get/put completions by content address. Opened lazily on first use."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_cache_path()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 30000")
            # Switching to WAL needs a moment alone with the file and SQLite may answer
            # SQLITE_BUSY at once, without the busy handler, while another process is
            # creating or opening it: retry briefly.
            for attempt in range(200):
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
                    conn.execute(_SCHEMA)
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 199:
                        conn.close()
                        raise
                    time.sleep(0.05)
            self._conn = conn
        return self._conn

    def get(self, key: str) -> Completion | None:
        row = (
            self._connect()
            .execute("SELECT completion FROM responses WHERE key = ?", (key,))
            .fetchone()
        )
        if row is None:
            return None
        try:
            # what the call is worth; that nothing was spent now is `cached=True`
            return replace(_decode(row[0]), cached=True)
        except (ValueError, TypeError, KeyError) as exc:  # a row from an older format
            log.warning("ignoring unreadable cache entry %s: %s", key[:12], exc)
            return None

    def put(
        self, key: str, completion: Completion, *, spec: ProviderSpec, request: ChatRequest
    ) -> None:
        self._connect().execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                request.purpose,
                str(spec),
                spec.model,
                completion.sample_index,
                request.prompt_version,
                time.time(),
                _encode(replace(completion, cached=False)),
            ),
        )

    def count(self, namespace: str | None = None) -> int:
        conn = self._connect()
        if namespace is None:
            row = conn.execute("SELECT COUNT(*) FROM responses").fetchone()
        else:
            row = conn.execute(
                "SELECT COUNT(*) FROM responses WHERE namespace = ?", (namespace,)
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
