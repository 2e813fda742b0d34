"""The one way a dataset folder is written: a cross-process lock, a compare-and-swap on each
file's content hash, and a journal that makes several files one atomic step.

Every writer of a datasets folder — the editor's saves (any number of ``rag datasets edit``
processes on one checkout), ``rag datasets import`` and ``rag datasets new-version`` —
takes :func:`locked` on the folder and writes through :func:`commit`:

* **the lock** is ``fcntl.flock`` on ``<folder>/.rag-datasets.lock``: one writer at a time
  across processes and threads (a thread that holds it may take it again). A writer that
  waits longer than ``timeout`` seconds gets a :class:`Conflict` saying who to wait for;
* **compare-and-swap**: each :class:`Write` names the sha256 the file must have now (``base``)
  or ``None`` for a file that must not exist yet; a mismatch is a :class:`Conflict` and
  nothing is written. The hash is taken under the lock, so no check-then-write window is left;
* **one atomic step**: the new contents go to temporary files, then a journal listing the
  renames is written (``<folder>/.rag-datasets.journal``), then the renames, then the journal
  is removed. A writer killed half-way leaves the journal; the next one to take the lock
  finishes the renames first (:func:`recover`), so a new version file never lacks its
  CHANGELOG entry. Temporary files without a journal are left-overs of a writer killed
  before it decided anything: removed;
* only regular files are read or replaced (:mod:`app.safe_io`): a FIFO named like a suite
  is refused, never opened for a blocking read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.errors import DatasetError
from app.limits import limit
from app.safe_io import read_bytes

__all__ = [
    "JOURNAL",
    "LOCK",
    "Conflict",
    "Write",
    "commit",
    "digest",
    "locked",
    "read_file",
    "recover",
]

LOCK = ".rag-datasets.lock"
JOURNAL = ".rag-datasets.journal"
_TMP = ".rag-tx"  # the suffix of a transaction's temporary files

_held = threading.local()  # realpath of folder -> depth, per thread


class Conflict(DatasetError):
    """A file on disk is not the one the writer read (or the lock could not be had)."""


@dataclass(frozen=True)
class Write:
    """``data`` into ``path`` (a file directly in the folder); ``base``: the sha256 the file
    must have now, ``None``: the file must not exist (a new version is never a replacement)."""

    path: Path
    data: bytes
    base: str | None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(path: Path, what: str = "dataset file") -> bytes:
    """The bytes of a regular file in a datasets folder (a FIFO, device, folder: refused)."""
    return read_bytes(path, max_bytes=limit("dataset_file_bytes"), what=what)


def _depth() -> dict[str, int]:
    held: dict[str, int] | None = getattr(_held, "depth", None)
    if held is None:
        held = _held.depth = {}
    return held


@contextlib.contextmanager
def locked(folder: Path, *, timeout: float = 60.0) -> Iterator[None]:
    """Hold the folder's writer lock (reentrant within a thread); replay a left journal."""
    key = os.path.realpath(folder)
    depth = _depth()
    if depth.get(key):
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    try:
        fd = os.open(Path(folder) / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise DatasetError(
            f"{folder}: cannot take the datasets lock ({exc.strerror}) — check that the folder "
            "exists and is writable"
        ) from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if time.monotonic() >= deadline:
                    raise Conflict(
                        f"{Path(folder) / LOCK}: another writer (an editor, an import, "
                        f"new-version) has been writing this datasets folder for {timeout:.0f} s "
                        "— wait for it to finish (or stop it), then save again"
                    ) from None
                time.sleep(0.01)
        depth[key] = 1
        try:
            recover(Path(folder))
            yield
        finally:
            depth.pop(key, None)
    finally:
        os.close(fd)  # releases the flock


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    with path.open("xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def recover(folder: Path) -> bool:
    """Finish a transaction a killed writer left (call under the lock); True when one was."""
    journal = folder / JOURNAL
    done = False
    if journal.exists():
        try:
            steps = json.loads(journal.read_text(encoding="utf-8"))["renames"]
        except (OSError, ValueError, KeyError, TypeError):
            steps = []  # the journal is renamed into place whole: unreadable = not ours
        for tmp, target in steps:
            if (folder / tmp).is_file():
                os.replace(folder / tmp, folder / target)
        journal.unlink(missing_ok=True)
        _fsync_dir(folder)
        done = True
    for stray in folder.glob(f".*{_TMP}"):  # a writer killed before its journal: undecided
        stray.unlink(missing_ok=True)
    return done


def _check(write: Write) -> None:
    path = write.path
    if write.base is None:
        if os.path.lexists(path):
            raise Conflict(f"{path.name} appeared on disk meanwhile — reload and save again")
        return
    if not os.path.lexists(path):
        raise Conflict(f"{path.name} was removed meanwhile — reload and save again")
    if digest(read_file(path)) != write.base:
        raise Conflict(f"{path.name} was changed on disk meanwhile — reload and save again")


def commit(folder: Path, writes: list[Write]) -> None:
    """Write every file of ``writes`` or none: checked (compare-and-swap), then renamed into
    place as one step through the journal. Takes the folder's lock (a holder may call it)."""
    folder = Path(folder)
    with locked(folder):
        for write in writes:
            if write.path.parent.resolve() != folder.resolve():
                raise ValueError(f"{write.path} is not in {folder}")
            _check(write)
        tx = uuid.uuid4().hex[:12]
        renames: list[tuple[str, str]] = []
        try:
            for n, write in enumerate(writes):
                tmp = f".{write.path.name}.{tx}.{n}{_TMP}"
                _write_new(folder / tmp, write.data)
                renames.append((tmp, write.path.name))
            staged = folder / f".journal.{tx}{_TMP}"
            _write_new(staged, json.dumps({"renames": renames}).encode("utf-8"))
        except BaseException:
            for tmp, _ in renames:
                (folder / tmp).unlink(missing_ok=True)
            raise
        os.replace(staged, folder / JOURNAL)  # the decision: from here on, it happens
        _fsync_dir(folder)
        recover(folder)
