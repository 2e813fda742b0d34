"""One report's cases as columns: what ``rag eval compare`` keeps of each case.

A comparison reads, of each case, its id, tags, refused flag, answer, metric values,
outcome class and ``--repeat`` stability (:class:`~app.eval.compare.rows.CaseView`). It keeps
none of the decoded cases: :class:`CaseColumns` takes them one at a time (:meth:`add`) and
keeps numbers — each metric's value (a float, NaN when undefined or absent), the refused
flag (0/1/NaN), a 64-bit hash of the answer (two answers are "the same" when their hashes
are: a false "same" has a chance of 2⁻⁶⁴ per pair), small integer codes for the
outcome class and the tag list, the stability flag — plus the id and an id → row map for
the pairing. At 100,000 cases that is a few MB per report, whatever the cases' traces hold;
:func:`read_columns` fills one from a report file, streamed line by line for the layout
``rag eval run`` writes (:func:`app.eval.report.stream.line_report`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import ReportError
from app.eval.report.records import ReportSummary
from app.eval.report.stream import (
    CompareCase,
    NotLineLayout,
    decode_lines,
    line_report,
    load_lean,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from app.eval.compare.rows import CaseView

__all__ = ["CaseColumns", "read_both", "read_columns"]

_CHUNK = 4096  # cases gathered as Python values before they become arrays
#: two reports of more bytes than this together are read side by side, the base's in a child
#: process (each reading is Python computing: one core each)
PARALLEL_BYTES = 200_000_000
_NONE = -1  # the code of "no outcome" (a report written before outcome classes)


def digest(answer: str | None) -> int:
    """The answer's identity within this process: equal answers (``answer or ""``) have
    equal digests; two different ones the same with a chance of 2⁻⁶⁴ (a 64-bit hash)."""
    return hash(answer or "")


class CaseColumns:
    """The columns of one report's cases, in the order added (module docstring).

    ``names``: the metrics kept (the report's summary's). After :meth:`finish`: ``ids``,
    ``index`` (id → row), ``values`` (rows × names), ``refused``, ``digests`` (int64),
    ``answered`` (a non-empty answer), ``outcomes`` (codes into ``outcome_names``; -1 none),
    ``tag_codes`` (codes into ``tag_lists``), ``unstable``; ``nan_at``: the (row, column)
    of a value that is NaN (not null) — refused when a comparison reads it."""

    def __init__(self, names: Sequence[str], source: str = "") -> None:
        self.names = list(names)
        self.col = {name: j for j, name in enumerate(self.names)}
        self.source = source
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.outcome_names: list[str] = []
        self._outcome_code: dict[str, int] = {}
        self.tag_lists: list[tuple[str, ...]] = []
        self._tag_code: dict[tuple[str, ...], int] = {}
        self.nan_at: list[tuple[int, int]] = []
        self._flat: list[float | None] = []
        self._refused: list[bool | None] = []
        self._digests: list[int] = []
        self._answered: list[bool] = []
        self._outcomes: list[int] = []
        self._tags: list[int] = []
        self._unstable: list[bool] = []
        self._parts: list[tuple[Any, ...]] = []
        self.values: NDArray[np.float64] = np.zeros((0, len(self.names)))
        self.refused: NDArray[np.float64] = np.zeros(0)
        self.digests: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.answered: NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.outcomes: NDArray[np.int16] = np.zeros(0, dtype=np.int16)
        self.tag_codes: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.unstable: NDArray[np.bool_] = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, case: CaseView, line_no: int | None = None) -> None:
        """Keep the case's columns (``line_no``: its line in ``source``, for a duplicate id)."""
        cid = case.id
        row = len(self.ids)
        if cid in self.index:
            at = self.source or "report"
            at += f":{line_no}" if line_no is not None else ""
            raise ReportError(
                f"{at}: case id {cid!r} appears twice; ids must be unique "
                "(is this a concatenation of two reports? `rag eval merge` combines shards)"
            )
        self.index[cid] = row
        self.ids.append(cid)
        metrics = case.metrics
        names = self.names
        if len(metrics) == len(names) and list(metrics) == names:
            values = [s.value for s in metrics.values()]
        else:
            values = [None if (s := metrics.get(name)) is None else s.value for name in names]
        self._flat.extend(values)
        self._refused.append(case.refused)
        answer = case.answer
        self._digests.append(digest(answer))
        self._answered.append(bool(answer))
        outcome = getattr(case, "outcome", None)
        if outcome is None:
            self._outcomes.append(_NONE)
        else:
            code = self._outcome_code.get(outcome)
            if code is None:
                code = self._outcome_code[outcome] = len(self.outcome_names)
                self.outcome_names.append(str(outcome))
            self._outcomes.append(code)
        tags = tuple(case.tags)
        tcode = self._tag_code.get(tags)
        if tcode is None:
            tcode = self._tag_code[tags] = len(self.tag_lists)
            self.tag_lists.append(tags)
        self._tags.append(tcode)
        record = getattr(case, "repeat", None)
        self._unstable.append(bool(record is not None and record.unstable))
        if len(self._refused) >= _CHUNK:
            self._flush()

    def _flush(self) -> None:
        if not self._refused:
            return
        n, k = len(self._refused), len(self.names)
        values = np.array(self._flat, dtype=float).reshape(n, k)  # None → NaN
        if int(np.isnan(values).sum()) != self._flat.count(None):
            first = len(self.ids) - n
            rows, cols = np.nonzero(np.isnan(values))
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                if self._flat[r * k + c] is not None:
                    self.nan_at.append((first + r, c))
        self._parts.append(
            (
                values,
                np.array(self._refused, dtype=float),
                np.array(self._digests, dtype=np.int64),
                np.array(self._answered, dtype=bool),
                np.array(self._outcomes, dtype=np.int16),
                np.array(self._tags, dtype=np.int32),
                np.array(self._unstable, dtype=bool),
            )
        )
        for buf in (self._flat, self._refused, self._digests, self._answered):
            buf.clear()
        for codes in (self._outcomes, self._tags, self._unstable):
            codes.clear()

    def finish(self) -> CaseColumns:
        """Turn what was added into the arrays; returns self."""
        self._flush()
        if self._parts:
            (
                self.values,
                self.refused,
                self.digests,
                self.answered,
                self.outcomes,
                self.tag_codes,
                self.unstable,
            ) = (np.concatenate(cols) for cols in zip(*self._parts, strict=True))
        self._parts = []
        return self

    @classmethod
    def of(cls, names: Sequence[str], cases: Iterable[CaseView]) -> CaseColumns:
        """The columns of cases already in memory (a typed report's, or lean views)."""
        out = cls(names)
        for case in cases:
            out.add(case)
        return out.finish()


def read_columns(path: Path) -> tuple[ReportSummary, CaseColumns]:
    """A report file's summary and its cases' columns: the runner's line layout streamed
    (one case decoded at a time, :class:`~app.eval.report.views.CompareCase`), any other
    layout read whole by the lean reader (:func:`app.eval.report.stream.load_lean`)."""
    path = Path(path)
    try:
        summary, lines = line_report(path, lean=True)  # no bad_cases / sent_texts: unread
    except NotLineLayout:
        lean = load_lean(path, CompareCase)
        return lean.summary, CaseColumns.of(list(lean.summary.metrics), lean.cases)
    cols = CaseColumns(list(summary.metrics), str(path))
    for line_no, case in decode_lines(path, lines, CompareCase):
        cols.add(case, line_no)
    return summary, cols.finish()


def read_both(
    base: Path, new: Path
) -> tuple[tuple[ReportSummary, CaseColumns], tuple[ReportSummary, CaseColumns]]:
    """:func:`read_columns` of both reports: side by side on two cores when they are large
    (:data:`PARALLEL_BYTES`; the base's columns come back from a forked child), else one after
    the other. Errors as in order: the base's first."""
    try:
        size = Path(base).stat().st_size + Path(new).stat().st_size
    except OSError:
        size = 0  # read_columns names what is wrong
    if size <= PARALLEL_BYTES or (os.cpu_count() or 1) < 2 or "fork" not in _methods():
        return read_columns(base), read_columns(new)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        first = pool.submit(read_columns, base)
        try:
            second: tuple[ReportSummary, CaseColumns] | None = read_columns(new)
            failed: ReportError | None = None
        except ReportError as exc:
            second, failed = None, exc
        got = first.result()  # the base's error, when it has one, first
    if failed is not None or second is None:
        raise failed or ReportError(f"{new}: could not be read")
    return got, second


def _methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()
