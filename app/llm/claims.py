"""Who is calling for a cache key right now, across processes that share one response cache.

Two ``rag eval run`` processes started together on one ``RAG_CACHE_DIR`` both miss the
cache for the same call; without a claim both pay for it. So before a provider call that
missed the cache, the engine *claims* its key: one ``INSERT OR IGNORE`` into the ``claims``
table of the same SQLite file (:meth:`app.llm.cache.ResponseCache.claim`). The process
whose row landed calls the provider, stores the entry and deletes its claim in one
transaction. A process that finds a live claim of another process polls (``asyncio.sleep``,
never blocking its event loop) until one of:

* the entry appears in the cache: it is a hit, nothing paid again;
* the claim is gone without an entry (the owner's call failed, or it was cancelled): this
  process claims the key and calls itself;
* the owner is dead: same host and its pid no longer runs, is a zombie, or is another
  process with a reused pid (start time differs, Linux ``/proc``), e.g. after ``kill -9``;
* the claim expired: its owner refreshes the expiry of the claims it holds every
  :data:`HEARTBEAT_S` seconds, so a claim of a stopped, hung or unreachable owner (another
  host on a shared file system) goes stale after :data:`CLAIM_TTL_S` seconds;
* the waiter's own bound (``EngineConfig.claim_wait_s``) is reached: it calls itself.

Claims are released on success (with the entry), on error, on cancellation, on
``Engine.aclose()`` / ``ResponseCache.close()`` and at interpreter exit (``atexit``).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CLAIM_TTL_S = 30.0  # a claim nobody refreshed for this long is stale
HEARTBEAT_S = 10.0  # how often an owner refreshes the claims it holds
POLL_FIRST_S = 0.01  # a waiter's first poll interval; it grows by POLL_GROWTH ...
POLL_GROWTH = 1.5
POLL_MAX_S = 0.25  # ... up to this

CLAIMS_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    key          TEXT PRIMARY KEY,
    owner_pid    INTEGER NOT NULL,
    owner_start  TEXT,
    host         TEXT NOT NULL,
    token        TEXT NOT NULL,
    expires      REAL NOT NULL
)
"""


@dataclass(frozen=True)
class Owner:
    """The identity a process writes into its claims."""

    pid: int
    start: str | None  # /proc start time (clock ticks since boot); None when unknown
    host: str
    token: str  # unique per ResponseCache instance: only its own claims are released

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(pid, _proc_start(pid), socket.gethostname(), uuid.uuid4().hex)


@dataclass(frozen=True)
class Holder:
    """A row of the claims table."""

    pid: int
    start: str | None
    host: str
    token: str
    expires: float

    def stale(self, me: Owner, now: float | None = None) -> bool:
        """Expired, or its owner is on this host and no longer running."""
        if self.expires < (time.time() if now is None else now):
            return True
        return self.host == me.host and not process_alive(self.pid, self.start)


def _proc_stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid ..." — comm may hold spaces and parentheses
    return text.rsplit(")", 1)[-1].split()


def _proc_start(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def process_alive(pid: int, start: str | None = None) -> bool:
    """Whether ``pid`` runs on this host (a zombie is dead; a different start time means
    the pid was reused by another process)."""
    if pid <= 0:
        return False
    fields = _proc_stat(pid)
    if fields is not None:
        if fields[0] in ("Z", "X", "x"):
            return False
        return start is None or len(fields) <= 19 or fields[19] == start
    if Path("/proc/self/stat").exists():  # /proc works here, so the pid is gone
        return False
    try:  # no /proc (macOS): ask the kernel
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def next_poll(delay: float) -> float:
    return min(delay * POLL_GROWTH, POLL_MAX_S)
