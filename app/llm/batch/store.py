"""Batch state that survives a restart: which batch each pending call (cache key) is in."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    batch_id     TEXT PRIMARY KEY,
    family       TEXT NOT NULL,
    endpoint     TEXT NOT NULL,
    model        TEXT NOT NULL,
    status       TEXT NOT NULL,          -- submitted | ended | failed
    submitted_at REAL NOT NULL,
    updated_at   REAL NOT NULL,
    requests     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    key          TEXT PRIMARY KEY,       -- the response-cache key of the call
    batch_id     TEXT NOT NULL,
    custom_id    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS items_batch ON items(batch_id);
"""


@dataclass(frozen=True)
class PendingItem:
    key: str
    batch_id: str
    custom_id: str


class BatchStore:
    """SQLite (WAL) next to the response cache; one connection per process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def record_submitted(
        self,
        batch_id: str,
        *,
        family: str,
        endpoint: str,
        model: str,
        items: Iterable[tuple[str, str]],  # (key, custom_id)
    ) -> None:
        rows = list(items)
        now = time.time()
        with self._lock, self._conn() as db:
            db.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, 'submitted', ?, ?, ?)",
                (batch_id, family, endpoint, model, now, now, len(rows)),
            )
            db.executemany(
                "INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
                [(key, batch_id, cid) for key, cid in rows],
            )

    def pending(self, key: str) -> PendingItem | None:
        """The submitted, not yet collected batch holding ``key``, if any."""
        with self._lock:
            row = (
                self._conn()
                .execute(
                    "SELECT i.key, i.batch_id, i.custom_id FROM items i JOIN batches b "
                    "ON b.batch_id = i.batch_id WHERE i.key = ? AND b.status = 'submitted'",
                    (key,),
                )
                .fetchone()
            )
        return PendingItem(*row) if row else None

    def items_of(self, batch_id: str) -> dict[str, str]:
        """custom_id -> key for one batch."""
        with self._lock:
            rows = (
                self._conn()
                .execute("SELECT custom_id, key FROM items WHERE batch_id = ?", (batch_id,))
                .fetchall()
            )
        return dict(rows)

    def batch(self, batch_id: str) -> tuple[str, str, str, str] | None:
        """(family, endpoint, model, status) of a batch."""
        with self._lock:
            row = (
                self._conn()
                .execute(
                    "SELECT family, endpoint, model, status FROM batches WHERE batch_id = ?",
                    (batch_id,),
                )
                .fetchone()
            )
        return tuple(row) if row else None

    def finish(self, batch_id: str, status: str) -> None:
        with self._lock, self._conn() as db:
            db.execute(
                "UPDATE batches SET status = ?, updated_at = ? WHERE batch_id = ?",
                (status, time.time(), batch_id),
            )

    def submitted(self) -> list[str]:
        with self._lock:
            rows = (
                self._conn()
                .execute("SELECT batch_id FROM batches WHERE status = 'submitted'")
                .fetchall()
            )
        return [r[0] for r in rows]
