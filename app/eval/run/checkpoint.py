"""Run checkpoints in SQLite: every finished case is committed the moment it finishes.

``<cache_dir>/runs/<run_id>.sqlite3`` holds the run's configuration and one row per
finished case (its full result record). ``rag eval run --resume RUN_ID`` reopens it, skips
every stored case and runs only the rest, so a crash or Ctrl-C never re-buys a case.

A case row is its :class:`~app.eval.report.records.CaseResult` as ``model_dump_json()``; reading
it back validates it, so a corrupted row is an error naming the case, never a silent gap.

``commit_every = N > 1`` (the runner sets it for a run whose providers are all offline:
a case there costs CPU only and comes out the same when computed again) commits the cases in
groups of ``N`` (or after :data:`GROUP_MAX_S` seconds), each group with the process counters
of its last case in one transaction, and before every read, ``set`` and ``close`` (also on
Ctrl-C): a SIGKILL then loses at most ``N - 1`` finished cases, which ``--resume``
computes again. One transaction per case costs a lock shared with the worker processes
(``app.eval.run.workers``), and SQLite's busy wait sleeps whole milliseconds.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from pydantic import ValidationError

from app.errors import ConfigError
from app.paths import cache_dir
from app.wellformed import model_json

if TYPE_CHECKING:  # read back when a stored case is (a new run starts without the records)
    from app.eval.report.records import CaseResult

#: stored cases read per query by :meth:`Checkpoint.results`
RESULTS_PAGE = 256
#: the longest a finished case waits in a group before it is committed (``commit_every``)
GROUP_MAX_S = 2.0


def runs_dir() -> Path:
    return cache_dir() / "runs"


class Checkpoint:
    def __init__(
        self, path: Path, config: dict[str, Any] | None = None, *, background: bool = False
    ) -> None:
        """Open (or make) the database at ``path``; ``config``: store it as a new run's
        configuration, in the transaction that makes the tables (a run killed meanwhile
        leaves both or neither). ``background``: the database is opened by a thread (its
        file writes and syncs release the GIL) while the caller goes on; the first use
        waits for it (:meth:`ready`) and raises what it raised."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.commit_every = 1  # cases per transaction (see the module docstring)
        self._group: list[tuple[str, str]] = []  # finished cases not committed yet
        self._group_meta: dict[str, Any] = {}  # their meta entries (the last of each key)
        self._group_since = 0.0
        self._conn: sqlite3.Connection | None = None
        self._failed: BaseException | None = None
        self._opening: threading.Thread | None = None
        if background:
            self._opening = threading.Thread(
                target=self._open_aside, args=(config,), name="checkpoint-open", daemon=True
            )
            self._opening.start()
        else:
            self._conn = self._connect(config)

    def _connect(self, config: dict[str, Any] | None) -> sqlite3.Connection:
        # check_same_thread=False: opened by the thread of ``background``, used by the
        # caller's thread once ready() has joined it (never by two threads at once)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN")
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            db.execute(
                "CREATE TABLE IF NOT EXISTS cases (case_id TEXT PRIMARY KEY, result TEXT NOT NULL)"
            )
            if config is not None:
                db.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(config),))
            db.execute("COMMIT")
        except BaseException:
            db.close()
            raise
        return db

    def _open_aside(self, config: dict[str, Any] | None) -> None:
        try:
            self._conn = self._connect(config)
        except BaseException as exc:  # raised in the caller's thread by ready()
            self._failed = exc

    def ready(self) -> None:
        """Wait until the database is open (``background``); raise what opening raised."""
        if self._opening is not None:
            self._opening.join()
            self._opening = None
        if self._failed is not None:
            raise self._failed

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.ready()
            assert self._conn is not None
        return self._conn

    @classmethod
    def create(
        cls,
        run_id: str,
        config: dict[str, Any],
        root: Path | None = None,
        *,
        background: bool = False,
    ) -> Checkpoint:
        """A new run's checkpoint holding ``config`` (``background``: see ``__init__``; a
        run opens its checkpoint while its first case works toward its first request)."""
        path = (root or runs_dir()) / f"{run_id}.sqlite3"
        if path.exists():
            raise ConfigError(f"run {run_id} already has a checkpoint at {path}; use --resume")
        return cls(path, config, background=background)

    @classmethod
    def open(cls, run_id: str, root: Path | None = None) -> Checkpoint:
        path = (root or runs_dir()) / f"{run_id}.sqlite3"
        if not path.exists():
            known = sorted(p.stem for p in (root or runs_dir()).glob("*.sqlite3"))[-5:]
            raise ConfigError(
                f"no checkpoint for run {run_id!r} in {path.parent}; recent runs: {known or 'none'}"
            )
        return cls(path)

    def config(self) -> dict[str, Any]:
        self.flush()
        row = self._db.execute("SELECT value FROM meta WHERE key='config'").fetchone()
        if row is None:
            raise ConfigError(f"{self.path}: checkpoint has no run configuration")
        data: dict[str, Any] = json.loads(row[0])
        return data

    def done(self) -> dict[str, CaseResult]:
        return dict(self.results())

    def results(self) -> Iterator[tuple[str, CaseResult]]:
        """Every stored case, one at a time (a run of 10,000 never holds them all). A row
        written by an older version is rewritten in today's form, so :meth:`rows` always
        gives what ``CaseResult.model_dump_json()`` writes."""
        self.flush()
        after = ""
        while True:  # a page at a time (a resumed 100,000-case run never holds every row)
            page = self._db.execute(
                "SELECT case_id, result FROM cases WHERE case_id > ? ORDER BY case_id LIMIT ?",
                (after, RESULTS_PAGE),
            ).fetchall()
            if not page:
                return
            for case_id, text in page:
                result = self._case(case_id, text)
                if model_json(result) != text:
                    self.save(result)
                yield case_id, result
            after = page[-1][0]

    def ids(self) -> set[str]:
        self.flush()
        return {row[0] for row in self._db.execute("SELECT case_id FROM cases")}

    def rows(self, ids: Collection[str]) -> Iterator[str]:
        """The stored JSON of the cases in ``ids``, sorted by case id (SQLite's binary order
        of UTF-8 is Python's code-point order), streamed from the database."""
        self.flush()
        wanted = set(ids)
        cursor = self._db.execute("SELECT case_id, result FROM cases ORDER BY case_id")
        for case_id, text in cursor:
            if case_id in wanted:
                yield text

    def _case(self, case_id: str, text: str) -> CaseResult:
        from app.eval.report.records import CaseResult

        try:
            return CaseResult.model_validate_json(text)
        except ValidationError as first:
            data = json.loads(text)
            if isinstance(data, dict) and data.get("trace") == {}:
                data["trace"] = None  # written before the typed records (schema 1)
                try:
                    return CaseResult.model_validate(data)
                except ValidationError:
                    pass
            raise ConfigError(
                f"{self.path}: the checkpointed result of case {case_id!r} is not a valid "
                f"case result ({first.error_count()} problem(s), first: "
                f"{first.errors()[0]['msg']}); start a new run instead of --resume"
            ) from None

    def save(self, result: CaseResult, *, meta: tuple[str, Any] | None = None) -> None:
        """Commit one finished case (NaN is refused before anything is written), and with
        ``meta=(key, value)`` that meta entry in the same transaction (the runner's
        process counters: a case and the counters that include it land together)."""
        row = (result.id, _case_json(result))
        if self.commit_every > 1:
            if not self._group:
                self._group_since = time.monotonic()
            self._group.append(row)
            if meta is not None:  # serialised when committed: a fresh record per case
                self._group_meta[meta[0]] = meta[1]
            if (
                len(self._group) >= self.commit_every
                or time.monotonic() - self._group_since >= GROUP_MAX_S
            ):
                self.flush()
            return
        if meta is None:
            self._db.execute("INSERT OR REPLACE INTO cases VALUES (?, ?)", row)
            return
        entry = (meta[0], meta_json(meta[1]))
        self._db.execute("BEGIN")
        try:
            self._db.execute("INSERT OR REPLACE INTO cases VALUES (?, ?)", row)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", entry)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def flush(self) -> None:
        """Commit the group of finished cases (``commit_every``) and their meta entries."""
        if not self._group and not self._group_meta:
            return
        rows, self._group = self._group, []
        entries = [(k, meta_json(v)) for k, v in self._group_meta.items()]
        self._group_meta = {}
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT OR REPLACE INTO cases VALUES (?, ?)", rows)
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", entries)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def get(self, key: str) -> Any:
        self.flush()
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row is not None else None

    def processes(self, except_key: str | None = None) -> list[dict[str, Any]]:
        """What every process of this run recorded under ``process:<token>`` (its engine
        counters and duration, updated after each of its cases), except ``except_key``."""
        self.flush()
        rows = self._db.execute(
            "SELECT key, value FROM meta WHERE key LIKE 'process:%' ORDER BY rowid"
        ).fetchall()
        return [json.loads(value) for key, value in rows if key != except_key]

    def set(self, key: str, value: Any) -> None:
        self.flush()
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.ready()
            if self._conn is not None:
                self._conn.close()


def meta_json(value: Any) -> str:
    """A meta entry's JSON text (the process counters are written with every case): what
    ``json.loads`` reads back from it equals what it reads from ``json.dumps(value)``.
    msgspec encodes it (compact, UTF-8, the same float values: a few times faster) when
    its own decoding of that text equals ``value`` (plain JSON data); anything else (a NaN,
    which msgspec writes as null, an int key, a tuple, another type) is ``json.dumps``'s."""
    try:
        out = _ENCODER.encode(value)
        if _DECODER.decode(out) == value:
            return out.decode()
    except (TypeError, ValueError, OverflowError, UnicodeError, msgspec.MsgspecError):
        pass
    return json.dumps(value)


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def _case_json(result: CaseResult) -> str:
    """The row of one case; a NaN/infinity anywhere in it is refused (ReportError naming the
    field). Every model a case is made of serialises a non-finite float as the JSON constant
    ``NaN`` / ``Infinity`` / ``-Infinity`` (``ser_json_inf_nan="constants"``, checked by
    tests/unit/eval/test_checkpoint.py), so a row without those words holds none; only a
    row with one (in a number, or merely in a text) gets the full check."""
    text = model_json(result)  # text that is not valid Unicode: U+FFFD (app/wellformed.py)
    if "NaN" in text or "Infinity" in text:
        from app.eval.report.io import check_finite

        check_finite(result.model_dump(), f"case {result.id}")
    return text
