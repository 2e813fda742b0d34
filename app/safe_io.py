"""Reading user-supplied files safely: refuse what cannot be read *before* reading it.

Every command that opens a file the user names (datasets, prompt modules, ``releases.toml``,
reports, ``--history``) goes through :func:`read_bytes` / :func:`read_text` /
:func:`list_files`. They refuse, with one :class:`UnsafeInput` naming the file and the fix:

* a path that does not exist, or a symlink loop (``a.jsonl → a.jsonl``);
* a directory where a file is expected, and a FIFO, socket or device (``/dev/zero``) —
  checked with ``stat`` and again on the open descriptor (opened ``O_NONBLOCK``, so a
  FIFO swapped in between never blocks);
* a file larger than its limit (:mod:`app.limits`), from its size, before reading; a file
  that grows while read is cut at limit + 1 byte and refused too;
* bytes that are not UTF-8 (:func:`read_text` names line and column of the first bad byte);
* JSON (:func:`load_json`) that does not parse, nests too deep, or holds ``NaN`` /
  ``Infinity`` (not JSON, and a number no comparison can use) — with line and column.

:func:`list_files` refuses an empty folder: "0 files checked" is an input error, not a pass.

Writing files atomically has its home here too (every writer of a file a reader may open
at the same moment calls these; each fsyncs the data before the file appears under its
name, and gives it ordinary permissions, not a temp file's 0600):

* :func:`atomic_write_text` / :func:`atomic_write_bytes` — replace a file in one step;
* :func:`replacing` — the same for a writer that needs a path (SQLite builds a database);
* :func:`write_new_text` / :func:`write_new_chunks` — create a *new* file (``<stem>-2``…
  when the name is taken), never replacing one (reports); :func:`create_new_bytes` —
  create exactly this file or raise :class:`FileExistsError`;
* :func:`sweep_stale_temp_files` — temp files a killed writer left behind.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from app.errors import UserError
from app.wellformed import clean

__all__ = [
    "Chunks",
    "UnsafeInput",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_file",
    "create_new_bytes",
    "is_dir",
    "list_files",
    "load_json",
    "open_regular",
    "read_bytes",
    "read_text",
    "replacing",
    "sweep_stale_temp_files",
    "write_new_chunks",
    "write_new_text",
]


class UnsafeInput(UserError):
    """A user-named file that cannot be read safely; ``str()`` is the one-line message."""

    def __init__(self, path: Path | str, problem: str, fix: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem} — {fix}")
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        self.line = line


def _kind(mode: int) -> str | None:
    """The name of a file type we refuse, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _stat(path: Path, what: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeInput(
                path, "symlink loop", f"point the link at a real {what} or remove it"
            ) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            problem = "broken symlink" if os.path.islink(path) else "not found"
            raise UnsafeInput(path, problem, f"check the path of the {what}") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise UnsafeInput(path, "file name too long", "use a shorter path") from None
        raise UnsafeInput(
            path, f"cannot be read ({exc.strerror})", "check the file's permissions"
        ) from None
    except ValueError:  # an embedded NUL in the path
        raise UnsafeInput(repr(str(path)), "invalid path", "remove the NUL character") from None


def check_file(path: Path, *, max_bytes: int, what: str = "file") -> int:
    """Refuse anything but an existing regular file of at most ``max_bytes``; its size."""
    st = _stat(path, what)
    kind = _kind(st.st_mode)
    if kind is not None:
        raise UnsafeInput(path, f"is {kind}, not a {what}", f"give the path of a regular {what}")
    if st.st_size > max_bytes:
        raise UnsafeInput(
            path,
            f"{st.st_size:,} bytes is over the {max_bytes:,}-byte limit for a {what}",
            "split the file or check that it is the right one (limits: docs/limits.md)",
        )
    return st.st_size


def read_bytes(path: Path, *, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see the module docstring).

    The first read asks for the whole file (its size from the check, + 1 to see growth), so a
    file that does not change is one buffer, never held twice while chunks are joined."""
    size = check_file(path, max_bytes=max_bytes, what=what)
    fd = _open_checked(path, what)
    try:
        chunks: list[bytes] = []
        left = max_bytes + 1
        want = min(left, size + 1)
        while left > 0:
            chunk = os.read(fd, min(left, want))
            want = 1 << 20
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise UnsafeInput(
            path, f"cannot be read ({exc.strerror})", "check the file and its permissions"
        ) from None
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > max_bytes:
        raise UnsafeInput(
            path, f"grew past the {max_bytes:,}-byte limit while being read", "give a stable file"
        )
    return data


def open_regular(path: Path, *, what: str = "file") -> BinaryIO:
    """A regular file opened for reading in binary, for a reader that streams it (a dataset
    read line by line: its limits are per line and per case, not the file's size). The same
    refusals as :func:`read_bytes` but the size: not found, a loop, a directory, a FIFO,
    socket or device (checked with ``stat`` and again on the open descriptor)."""
    _stat_checked(path, what)
    return os.fdopen(_open_checked(path, what), "rb", buffering=1 << 20)


def _open_checked(path: Path, what: str) -> int:
    """A read-only descriptor of ``path``, checked again on the descriptor (a file swapped for
    a FIFO or device between ``stat`` and ``open`` is refused, the descriptor closed)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UnsafeInput(
            path, f"cannot be read ({exc.strerror})", "check the file's permissions"
        ) from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise UnsafeInput(
            path, f"cannot be read ({exc.strerror})", "check the file and its permissions"
        ) from None
    if kind is not None:  # swapped between stat and open
        os.close(fd)
        raise UnsafeInput(path, f"is {kind}, not a {what}", f"give a regular {what}")
    return fd


def _stat_checked(path: Path, what: str) -> None:
    kind = _kind(_stat(path, what).st_mode)
    if kind is not None:
        raise UnsafeInput(path, f"is {kind}, not a {what}", f"give the path of a regular {what}")


def decode(data: bytes, path: Path | str) -> str:
    """UTF-8 text of ``data``; a bad byte is an :class:`UnsafeInput` with line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UnsafeInput(
            path,
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})",
            "re-save the file with the encoding 'UTF-8' (is it a binary file?)",
            line=line,
        ) from None


def read_text(path: Path, *, max_bytes: int, what: str = "file") -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading byte-order mark is dropped)."""
    text = decode(read_bytes(path, max_bytes=max_bytes, what=what), path)
    return text.removeprefix("\ufeff")


def is_dir(path: Path) -> bool:
    """``Path.is_dir`` that never raises (a too-long name or a loop is simply not a folder)."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def list_files(folder: Path, pattern: str, *, what: str) -> list[Path]:
    """The files matching ``pattern`` in ``folder`` (sorted); an empty folder is refused."""
    st = _stat(folder, "folder")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeInput(folder, "is not a folder", f"give the folder that holds the {what}")
    try:
        found = sorted(folder.glob(pattern))
    except OSError as exc:
        raise UnsafeInput(
            folder, f"cannot be listed ({exc.strerror})", "check permissions"
        ) from None
    if not found:
        raise UnsafeInput(
            folder, f"holds no {pattern} file", f"point at a folder with {what}, or at a file"
        )
    return found


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} overflows to infinity")
    return value


class _BadNumber:
    """A NaN / Infinity / overflowing number, kept in place to find the field that holds it."""


def _bad_number_field(text: str) -> str | None:
    """The dotted path of the first NaN / Infinity / overflowing number in ``text`` (which
    :func:`parse_json` refused); parsed again only on this error path."""

    def bad_float(t: str) -> float | _BadNumber:
        value = float(t)
        return _BadNumber() if value != value or value in (float("inf"), float("-inf")) else value

    try:
        data = json.loads(text, parse_constant=lambda _: _BadNumber(), parse_float=bad_float)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, _BadNumber):
            return where or "(the document)"
        if isinstance(node, dict):
            items = [(f"{where}.{k}" if where else str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            items = [(f"{where}[{i}]", v) for i, v in enumerate(node)]
        else:
            continue
        stack.extend(reversed(items))  # document order
    return None


def parse_json(text: str, path: Path | str, *, what: str = "file") -> Any:
    """Parse JSON text strictly: errors name line and column; NaN/Infinity and nesting
    deeper than Python's recursion limit are refused, not crashed on."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise UnsafeInput(
            path, f"not valid JSON: {exc.msg} at column {exc.colno}",
            f"fix the {what}'s JSON syntax there", line=exc.lineno,
        ) from None  # fmt: skip
    except ValueError as exc:  # NaN / Infinity / -Infinity
        field = _bad_number_field(text)
        where = f" (field `{field}`)" if field else ""
        raise UnsafeInput(
            path, f"not valid JSON: {exc}{where}", "write a finite number or null (NaN and "
            "Infinity are not JSON)",
        ) from None  # fmt: skip
    except RecursionError:
        raise UnsafeInput(path, "JSON nested too deeply", f"check the {what}") from None


def load_json(path: Path, *, max_bytes: int, what: str = "file") -> Any:
    """:func:`read_text` + :func:`parse_json`."""
    return parse_json(read_text(path, max_bytes=max_bytes, what=what), path, what=what)


# ---------------------------------------------------------------- writing


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def sweep_stale_temp_files(folder: Path, name: str | None = None) -> list[Path]:
    """Remove ``.<name>.<pid>.<random>.tmp`` files whose writing process is gone (a kill
    between creating and renaming them); returns what was removed. ``name``: only the temp
    files of that target (a writer in a shared folder such as ``/tmp`` sweeps its own)."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    pattern = f".{glob.escape(name)}.*.tmp" if name is not None else ".*.tmp"
    for tmp in folder.glob(pattern):
        parts = tmp.name.split(".")
        pid = next((int(x) for x in reversed(parts[:-2]) if x.isdigit()), None)
        if pid is not None and pid != os.getpid() and not _pid_alive(pid):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _chmod_ordinary(fd: int) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # temp files are 0600; a report is an ordinary file


def _temp_in(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path``, named ``.<name>.<pid>.<random>.tmp`` (what
    :func:`sweep_stale_temp_files` recognises)."""
    return tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """``with replacing(path) as tmp:`` — write ``tmp`` (any way: a file, a SQLite
    database); when the block ends without an exception, ``tmp`` is fsynced, given ordinary
    permissions and renamed over ``path`` in one step. On an exception ``tmp`` is removed
    and ``path`` is untouched. A temp file a killed writer left is swept by the next write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temp_files(path.parent, path.name)
    fd, tmp = _temp_in(path)
    os.close(fd)
    try:
        yield Path(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
            _chmod_ordinary(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: a temp file in the same folder, fsynced,
    ordinary permissions, then ``os.replace``. A reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temp_files(path.parent, path.name)
    fd, tmp = _temp_in(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            _chmod_ordinary(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8 (``\\n`` line ends as given); text
    that is not valid Unicode is written as U+FFFD (app/wellformed.py)."""
    atomic_write_bytes(path, clean(text).encode("utf-8"))


def create_new_bytes(path: Path, data: bytes) -> None:
    """Create ``path`` holding ``data`` (fsynced, ordinary permissions), complete when it
    appears; raise :class:`FileExistsError` — writing nothing — when ``path`` exists, even
    one made meanwhile by another process (a link never replaces a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temp_files(path.parent, path.name)
    fd, tmp = _temp_in(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, lambda: (data,))
        os.link(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _candidates(path: Path) -> Iterator[Path]:
    yield path
    for n in range(2, 1000):
        yield path.with_name(f"{path.stem}-{n}{path.suffix}")


Chunks = Callable[[], Iterable[bytes]]


def _write_all(fh: BinaryIO, chunks: Chunks) -> None:
    for chunk in chunks():
        fh.write(chunk)
    fh.flush()
    os.fsync(fh.fileno())
    _chmod_ordinary(fh.fileno())


def _link_unnamed(path: Path, chunks: Chunks) -> Path | None:
    """Linux: write into an unnamed ``O_TMPFILE`` and link it in when complete (a kill
    leaves nothing); None where that is not available."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        fd = os.open(path.parent, flag | os.O_WRONLY, 0o666)
    except OSError:
        return None
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, chunks)
            for target in _candidates(path):
                try:  # linkat(AT_SYMLINK_FOLLOW) through /proc: a dir_fd selects linkat
                    os.link(f"/proc/self/fd/{fh.fileno()}", target.name, dst_dir_fd=dir_fd)
                except FileExistsError:
                    continue
                except OSError:  # no /proc, or a file system that refuses: fall back
                    return None
                return target
    finally:
        os.close(dir_fd)
    raise UserError(f"{path}: 999 files of that name exist; clean up the folder")


def write_new_text(path: Path, text: str) -> Path:
    """Write ``text`` to a *new* file at ``path`` (or ``<stem>-2``, ``-3``… if it exists) and
    return where; never replaces a file, never leaves a half-written or temp file.

    On Linux the text goes into an unnamed file (``O_TMPFILE``) that is linked into place
    only when complete: a ``kill -9`` at any moment leaves no file at all. Elsewhere a
    pid-named temp file is linked (not renamed: a link refuses to replace) and removed; a
    temp file a killed writer left is swept by the next write. Two processes writing the
    same name both keep their file.
    """
    data = clean(text).encode("utf-8")  # not valid Unicode: U+FFFD (app/wellformed.py)
    return write_new_chunks(path, lambda: (data,))


def write_new_chunks(path: Path, chunks: Chunks) -> Path:
    """:func:`write_new_text` of the bytes ``chunks()`` yields, written as they come (a
    report of 10,000 cases is never one string in memory). ``chunks`` may be called twice
    (a file system without ``O_TMPFILE`` linking): it must give the same bytes again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = _link_unnamed(path, chunks)
    if written is not None:
        return written
    sweep_stale_temp_files(path.parent)  # report names are unique: sweep the folder
    fd, tmp = _temp_in(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, chunks)
        for target in _candidates(path):
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue
            return target
        raise UserError(f"{path}: 999 files of that name exist; clean up the folder")
    finally:
        Path(tmp).unlink(missing_ok=True)
