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
Processes sharing the file also share a ``claims`` table (:mod:`app.llm.claims`): a call
that missed the cache is claimed before it is made, so two runs started together pay for
it once (:meth:`ResponseCache.claim`, :meth:`ResponseCache.put` releases the claim in the
same transaction that stores the entry).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import sqlite3
import time
import weakref
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from app import paths
from app.llm.claims import CLAIM_TTL_S, CLAIMS_SCHEMA, Holder, Owner
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion, Usage
from app.wellformed import clean

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
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def encode_completion(completion: Completion) -> str:
    """The stored form of a completion (one JSON object; ``repaired`` only when not 0, so
    the entries written before it existed keep their form). Text that is not valid Unicode
    is replaced by U+FFFD (:mod:`app.wellformed`; the engine has done so already for a
    provider's reply): the store never fails on it."""
    data = asdict(completion)
    if not data["repaired"]:
        del data["repaired"]
    return clean(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


_encode = encode_completion


def _decode(blob: str) -> Completion:
    data: dict[str, Any] = json.loads(blob)
    usage = Usage(**data.pop("usage"))
    return Completion(usage=usage, **data)


class ResponseCache:
    """Get/put completions by content address. Opened lazily on first use."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_cache_path()
        self._conn: sqlite3.Connection | None = None
        self.owner = Owner.current()
        self.held: set[str] = set()  # keys this instance has claimed and not released
        self._exit_hook = False

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
                    conn.execute(CLAIMS_SCHEMA)
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 199:
                        conn.close()
                        raise
                    time.sleep(0.05)
            self._conn = conn
            if not self._exit_hook:
                atexit.register(_release_at_exit, weakref.ref(self))
                self._exit_hook = True
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
        """Store an entry; a claim this instance holds on ``key`` is released with it
        (one transaction: a waiter sees the entry or the claim, never neither)."""
        conn = self._connect()
        row = (
            key,
            request.purpose,
            str(spec),
            spec.model,
            completion.sample_index,
            request.prompt_version,
            time.time(),
            _encode(replace(completion, cached=False)),
        )
        if key not in self.held:
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            return
        with _transaction(conn):
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            conn.execute("DELETE FROM claims WHERE key = ? AND token = ?", (key, self.owner.token))
        self.held.discard(key)

    # -- cross-process claims (app/llm/claims.py) ---------------------------------------
    def holder(self, key: str) -> Holder | None:
        """Who claims ``key`` (any process), or None."""
        row = (
            self._connect()
            .execute(
                "SELECT owner_pid, owner_start, host, token, expires FROM claims WHERE key = ?",
                (key,),
            )
            .fetchone()
        )
        return None if row is None else Holder(int(row[0]), row[1], row[2], row[3], row[4])

    def claim(self, key: str, ttl_s: float = CLAIM_TTL_S) -> bool:
        """Claim ``key`` for this instance: True when it holds the claim now, False when a
        live claim of someone else stands. A stale claim (dead owner, expired) is removed
        and taken over."""
        if key in self.held:
            return True
        conn = self._connect()
        me = self.owner
        for _ in range(3):
            found = self.holder(key)
            if found is not None:
                if found.token == me.token:
                    self.held.add(key)
                    return True
                if not found.stale(me):
                    return False
                log.info(
                    "taking over the claim on cache entry %s of pid %d on %s (%s)",
                    key[:12],
                    found.pid,
                    found.host,
                    "expired" if found.expires < time.time() else "not running",
                )
                conn.execute("DELETE FROM claims WHERE key = ? AND token = ?", (key, found.token))
            cursor = conn.execute(
                "INSERT OR IGNORE INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                (key, me.pid, me.start, me.host, me.token, time.time() + ttl_s),
            )
            if cursor.rowcount == 1:
                self.held.add(key)
                return True
        return False  # three races lost in a row: someone live holds it

    def release(self, key: str) -> None:
        """Give up this instance's claim on ``key`` (no-op when it holds none)."""
        if key not in self.held:
            return
        self.held.discard(key)
        if self._conn is not None:
            self._conn.execute(
                "DELETE FROM claims WHERE key = ? AND token = ?", (key, self.owner.token)
            )

    def refresh_claims(self, ttl_s: float = CLAIM_TTL_S) -> None:
        """Push the expiry of every claim this instance holds ``ttl_s`` ahead (heartbeat)."""
        if self.held and self._conn is not None:
            self._conn.execute(
                "UPDATE claims SET expires = ? WHERE token = ?",
                (time.time() + ttl_s, self.owner.token),
            )

    def release_all(self) -> None:
        self.held.clear()
        if self._conn is not None:
            self._conn.execute("DELETE FROM claims WHERE token = ?", (self.owner.token,))

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
            try:
                if self.held:
                    self.release_all()
            finally:
                self._conn.close()
                self._conn = None


class _transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def _release_at_exit(ref: weakref.ref[ResponseCache]) -> None:
    cache = ref()
    if cache is None or not cache.held:
        return
    with contextlib.suppress(sqlite3.Error):  # exiting anyway; the pid check frees them
        cache.release_all()
