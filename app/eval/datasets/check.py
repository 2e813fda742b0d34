"""``rag datasets check``: read every line of every dataset file and say what is wrong.

Business experts edit the JSONL files by hand, so the checker

* reads every line of every file and never stops at the first problem;
* names ``file:line: field:`` and says in plain words — English or Chinese
  (``lang``; see :mod:`app.eval.datasets.messages`) — what is wrong and how to fix it;
* tolerates (with a warning) a UTF-8 BOM, CRLF line ends and blank lines;
* refuses everything the loader (:func:`app.eval.datasets.case.load_dataset_file`) refuses,
  because the fields are validated by the same pydantic ``Case``;
* exits 0 when clean, 1 when any error was found, 2 when input cannot be read
  (missing file or folder, not UTF-8, an unknown git revision).

The layers, one module each: bytes → lines → JSON (:mod:`~app.eval.datasets.lines`), the
``Case`` fields (:mod:`~app.eval.datasets.fields`), ids across files (here: unique inside a
file and across suites; a newer version of the same suite repeats the ids it updates), the
meaning against the knowledge base (:mod:`~app.eval.datasets.meaning`) and, with
``--changed-since REV``, the release rules (:mod:`~app.eval.datasets.changes`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from app.errors import DatasetError
from app.eval.datasets.anchors import Broken, report_broken, resolve_labels, unlisted_anchors
from app.eval.datasets.case import FILE_NAME_RE, parse_file_name
from app.eval.datasets.changes import check_changed_since
from app.eval.datasets.fields import check_fields
from app.eval.datasets.hints import Place
from app.eval.datasets.index import CaseIndex
from app.eval.datasets.issues import CheckResult, Issue, Sink, display, show
from app.eval.datasets.lines import parse_line, raw_lines_of, read_lines, stream_lines
from app.eval.datasets.meaning import check_meaning
from app.eval.datasets.messages import Lang, resolve_lang
from app.limits import case_problems, limit
from app.paths import datasets_dir, kb_dir
from app.retrieval.kb import KnowledgeBase, load_kb
from app.safe_io import UnsafeInput, is_dir, list_files, open_regular

__all__ = [
    "CheckResult",
    "Checker",
    "Issue",
    "check_paths",
    "check_text",
    "default_paths",
    "suite_ids",
]


def default_paths(root: Path | None = None) -> list[Path]:
    """Every ``*.jsonl`` in the datasets folder."""
    folder = root or datasets_dir()
    return sorted(folder.glob("*.jsonl"))


def suite_of(path: Path) -> str:
    """The suite a file belongs to: ``smoke`` for ``smoke_v1.1.jsonl``, else the file stem."""
    parsed = parse_file_name(path.name)
    return parsed[0] if parsed else path.stem


class Checker:
    """Checks files one after another, remembering ids across files."""

    def __init__(self, kb: KnowledgeBase | None, result: CheckResult) -> None:
        self.kb = kb
        self.result = result
        self.seen_ids: dict[str, tuple[str, str]] = {}  # id -> (suite, "file:line")
        #: whether the ids of the file being checked are remembered for the files after it
        #: (the last file's are not: a 100,000-case file keeps no table of them)
        self.remember_ids = True

    def preload_ids(self, paths: Iterable[Path]) -> None:
        """Remember the ids of files that are not checked (so ids stay unique across suites)."""
        for path in paths:
            try:
                stream = open_regular(path, what="dataset file")
            except UnsafeInput:
                continue
            suite, shown = suite_of(path), display(path)
            with stream:
                for number, (_, raw, _) in enumerate(stream_lines(stream), start=1):
                    try:
                        obj = json.loads(raw) if raw is not None else None
                    except (ValueError, RecursionError):
                        continue
                    case_id = obj.get("id") if isinstance(obj, dict) else None
                    if isinstance(case_id, str) and case_id not in self.seen_ids:
                        self.seen_ids[case_id] = (suite, f"{shown}:{number}")

    def check_file(self, path: Path) -> None:
        """Check one file, read line by line (memory holds one line and the index of the
        valid cases, :class:`~app.eval.datasets.index.CaseIndex`, kept in ``result.loaded``)."""
        shown = display(path)
        sink = Sink(shown, self.result)
        try:  # special files and loops are refused before reading
            stream = open_regular(path, what="dataset file")
        except UnsafeInput as exc:
            sink.add_text(exc.line, "", exc.problem, exc.fix, code="unreadable")
            self.result.fatal = True
            return
        if FILE_NAME_RE.match(path.name) is None:
            sink.add(None, "", "file-name", code="file-name", name=repr(path.name))
        hasher = hashlib.sha256()
        index = CaseIndex(path, kb=self.kb)
        try:
            with stream:
                lines = read_lines(stream_lines(stream, hasher), sink)
                self.check_lines(sink, lines, suite_of(path), index=index)
        except OSError as exc:
            sink.add_text(
                None, "", f"cannot be read ({exc.strerror})", "check the file", code="unreadable"
            )
            self.result.fatal = True
            return
        index.sha256 = hasher.hexdigest()
        self.result.loaded[os.path.realpath(path)] = index

    def check_data(self, sink: Sink, data: bytes, suite: str) -> None:
        """Check the bytes of one file of ``suite`` (reported under ``sink.file``)."""
        self.check_lines(sink, read_lines(raw_lines_of(data), sink), suite)

    def check_lines(
        self,
        sink: Sink,
        lines: Iterable[tuple[int, int, str]],
        suite: str,
        *,
        index: CaseIndex | None = None,
    ) -> None:
        """Check the lines (number, byte offset, text) of one file of ``suite``; its valid
        cases are added to ``index``. More than ``dataset_cases`` lines holding a case stop
        the check with an error (a bound on what a run of the file may hold)."""
        self.result.files.setdefault(sink.file, 0)
        in_file: dict[str, int] = {}
        most = limit("dataset_cases")
        for number, offset, text in lines:
            obj = parse_line(sink, number, text)
            if obj is None:
                continue
            if self.result.files[sink.file] >= most:
                sink.add_text(
                    number,
                    "",
                    f"more than {most:,} cases in one file (dataset_cases)",
                    "split the file into several datasets (limits: docs/limits.md)",
                    code="limit",
                )
                self.result.fatal = True
                return
            self.result.files[sink.file] += 1
            for fld, problem, fix in case_problems(obj, text):  # limits, lone surrogates
                if "lone surrogate" in problem:
                    sink.add(number, fld, "surrogate", code="bad-value")
                else:
                    sink.add_text(number, fld, problem, fix, code="limit")
            broken: list[Broken] = []
            for key in unlisted_anchors(obj):
                sink.add(
                    number,
                    f"anchors.{key}",
                    "anchor-unlisted",
                    code="anchor-unlisted",
                    severity="warning",
                    value=show(key, 60),
                )
            if self.kb is not None and obj.get("anchors"):  # labels follow their passage
                obj, broken = resolve_labels(obj, self.kb)
            case = check_fields(sink, number, obj)
            if case is not None and index is not None:
                index.add(case, number, offset)
            self.check_id(sink, number, obj.get("id"), suite, in_file)
            check_meaning(sink, number, obj, self.kb, gone={b.chunk_id for b in broken})
            for b in broken:
                report_broken(sink, number, obj.get("id"), b)

    def check_id(
        self, sink: Sink, line: int, case_id: object, suite: str, in_file: dict[str, int]
    ) -> None:
        if not isinstance(case_id, str) or not case_id:
            return
        if case_id in in_file:
            where = f"{sink.file}:{in_file[case_id]}"
            sink.add(
                line, "id", "duplicate-id", code="duplicate-id", value=show(case_id), where=where
            )
            return
        in_file[case_id] = line
        first = self.seen_ids.get(case_id)
        if first is not None and first[0] != suite:
            sink.add(
                line,
                "id",
                "duplicate-id.suite",
                code="duplicate-id",
                value=show(case_id),
                suite=first[0],
                where=first[1],
            )
        elif first is None and self.remember_ids:
            self.seen_ids[case_id] = (suite, f"{sink.file}:{line}")


def _load_kb(kb_root: Path, result: CheckResult) -> KnowledgeBase | None:
    try:
        return load_kb(kb_root)
    except DatasetError as exc:
        Sink(display(kb_root), result).add(None, "", "kb", code="kb", why=str(exc))
        result.fatal = True
        return None


def _files(paths: list[Path], folder: Path, result: CheckResult) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if not os.path.lexists(p) and p.parent == Path() and (folder / p.name).is_file():
            p = folder / p.name  # `rag datasets check smoke_v1.1.jsonl` from the repo root
        if is_dir(p):
            try:  # an empty folder is an input error, not "0 files checked, ok"
                files.extend(list_files(p, "*.jsonl", what="dataset files"))
            except UnsafeInput as exc:
                Sink(display(p), result).add_text(None, "", exc.problem, exc.fix, code="unreadable")
                result.fatal = True
        else:
            files.append(p)
    if not files and not result.fatal:
        shown = ", ".join(display(p) for p in paths)
        Sink(shown, result).add(None, "", "no-files", code="unreadable")
        result.fatal = True
    return files


def check_paths(
    paths: Iterable[Path] | None = None,
    *,
    folder: Path | None = None,
    kb_root: Path | None = None,
    schema: Path | None = None,  # kept for callers; the rules are the pydantic Case's
    changed_since: str | None = None,
    kb: KnowledgeBase | None = None,
    lang: str | None = None,
) -> CheckResult:
    """Check dataset files (default: every ``*.jsonl`` in ``folder``) and return all issues.

    Never raises for problems inside the files; raises :class:`DatasetError` only when the
    datasets folder or the git revision cannot be used. ``kb`` may be passed pre-loaded.
    With ``paths`` that lie in ``folder``, the other files of ``folder`` are read for their
    ids only (so a case is checked against the other suites) and not reported; a bare file name that is not in
    the current folder is looked up in ``folder``.
    """
    del schema  # the rules are the pydantic Case's; the argument is accepted for old callers
    folder = folder or datasets_dir()
    result = CheckResult(lang=resolve_lang(lang))
    kb = kb or _load_kb(kb_root or kb_dir(), result)
    checker = Checker(kb, result)
    given = list(paths) if paths is not None else []
    if not given:
        if not is_dir(folder):
            raise DatasetError(f"{folder}: datasets folder not found")
        files = default_paths(folder)
        if not files:
            Sink(display(folder), result).add(None, "", "no-files", code="unreadable")
            result.fatal = True
    else:
        files = _files(given, folder, result)
        inside = {os.path.realpath(x.parent) for x in files} & {os.path.realpath(folder)}
        if inside and is_dir(folder):  # a suite file: its ids are unique across the suites
            asked = {os.path.realpath(x) for x in files}
            checker.preload_ids(
                [f for f in default_paths(folder) if os.path.realpath(f) not in asked]
            )
    seen: set[str] = set()
    for n, file in enumerate(files, start=1):
        key = os.path.realpath(file)  # never raises on a symlink loop (Path.resolve does)
        if key in seen:
            continue
        seen.add(key)
        checker.remember_ids = n < len(files)  # no file after the last one needs its ids
        checker.check_file(file)
    if changed_since:
        check_changed_since(changed_since, folder, result)
    return result


def suite_ids(folder: Path, *, besides: str) -> dict[str, tuple[str, str]]:
    """Ids of every file in ``folder`` except suite ``besides``: id -> (suite, "file:line")."""
    from app.eval.datasets.case import available_suites

    checker = Checker(None, CheckResult())
    checker.preload_ids(
        p
        for name, versions in available_suites(folder).items()
        if name != besides
        for _, p in versions
    )
    return checker.seen_ids


def check_text(
    text: str,
    *,
    suite: str,
    file: str = "<editor>",
    kb: KnowledgeBase | None = None,
    lang: Lang | str | None = None,
    other_ids: dict[str, tuple[str, str]] | None = None,
    place: Place = "jsonl",
) -> CheckResult:
    """Check JSONL ``text`` as if it were a file of ``suite`` (the browser editor's check).

    ``other_ids`` (id -> (suite, where)) are the ids of the other suites; ``place`` is where
    the expert wrote the cases (the hints in the messages take its format).
    """
    result = CheckResult(lang=resolve_lang(lang), place=place)
    checker = Checker(kb, result)
    checker.seen_ids.update(other_ids or {})
    checker.check_data(Sink(file, result), text.encode("utf-8", "surrogatepass"), suite)
    return result
