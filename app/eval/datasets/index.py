"""A checked dataset file as an index of its cases, read again one case at a time.

``rag eval run`` checks its dataset line by line (:meth:`app.eval.datasets.check.Checker.check_file`)
and keeps, per valid case, its id, the byte offset of its line and whether it has history —
not the :class:`~app.eval.datasets.case.Case` objects: a 100,000-case file is an index of a
few MB, and each case is parsed again when the run takes it (:meth:`CaseIndex.read`), so the
run holds the cases it is working on, not the file. The re-read applies what the check
applied (labels following their passage through the knowledge base), so a case is the one
the check validated; a line that no longer parses or validates (the file was edited while
the run read it) is a :class:`~app.errors.DatasetError` naming the file and line.
"""

from __future__ import annotations

import json
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from app.errors import DatasetError
from app.eval.datasets.case import Case, Suite, parse_file_name

if TYPE_CHECKING:
    from app.retrieval.kb import KnowledgeBase

__all__ = ["CaseIndex", "CaseQueue"]


@dataclass
class CaseIndex:
    """The valid cases of one dataset file: ids, line offsets and lines, in file order."""

    path: Path
    kb: KnowledgeBase | None = None
    sha256: str = ""
    ids: list[str] = field(default_factory=list)
    offsets: array[int] = field(default_factory=lambda: array("q"))
    lines: array[int] = field(default_factory=lambda: array("q"))
    multi_turn: bytearray = field(default_factory=bytearray)

    def add(self, case: Case, line: int, offset: int) -> None:
        self.ids.append(case.id)
        self.offsets.append(offset)
        self.lines.append(line)
        self.multi_turn.append(1 if case.history else 0)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def name(self) -> str:
        parsed = parse_file_name(self.path.name)
        return parsed[0] if parsed else self.path.stem

    @property
    def version(self) -> str:
        parsed = parse_file_name(self.path.name)
        return f"{parsed[1]}.{parsed[2]}" if parsed else "0.0"

    def select(self, limit: int | None, keep: Callable[[str], bool] | None = None) -> list[int]:
        """The positions of the run's cases: sorted by id, the first ``limit`` of them, then
        those whose id ``keep`` keeps (a shard), returned in file order."""
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        chosen = order[:limit] if limit is not None else order
        if keep is not None:
            chosen = [i for i in chosen if keep(self.ids[i])]
        chosen.sort()
        return chosen

    def read(self, positions: Iterable[int]) -> Iterator[Case]:
        """The cases at ``positions`` (best in file order: the file is read forward), one
        at a time."""
        from app.eval.datasets.anchors import resolve_labels

        with self.path.open("rb") as stream:
            for i in positions:
                stream.seek(self.offsets[i])
                raw = stream.readline()
                line = self.lines[i]
                try:
                    text = raw.decode("utf-8")
                    if i == 0 or self.offsets[i] == 0:
                        text = text.removeprefix("\ufeff")
                    obj = json.loads(text)
                    if self.kb is not None and isinstance(obj, dict) and obj.get("anchors"):
                        obj, _ = resolve_labels(obj, self.kb)
                    case = Case.model_validate(obj)
                except (ValueError, RecursionError, ValidationError):
                    case = None
                if case is None or case.id != self.ids[i]:
                    raise DatasetError(
                        f"{self.path}:{line}: the line changed while the run was reading the "
                        "file (it no longer holds the case that was checked) — do not edit a "
                        "dataset during a run; run again"
                    )
                yield case

    def questions(self, positions: Iterable[int]) -> Iterator[str]:
        """The ``question`` of each single-turn case at ``positions`` (not validated again)."""
        for case in self.read(i for i in positions if not self.multi_turn[i]):
            yield case.question

    def suite(self, positions: Iterable[int] | None = None) -> Suite:
        """A :class:`Suite` holding the cases (all of them, in file order, by default)."""
        chosen = range(len(self.ids)) if positions is None else positions
        return Suite(
            name=self.name,
            version=self.version,
            path=self.path,
            sha256=self.sha256,
            cases=list(self.read(chosen)),
        )


class CaseQueue:
    """The cases still to run, parsed from the file as they are taken: ``popleft`` (thread
    safe: the worker processes' feeder threads take from it too) raises IndexError when
    none is left; :meth:`extend` puts cases back (a dead worker's)."""

    def __init__(self, cases: Iterator[Case]) -> None:
        self._lock = threading.Lock()
        self._back: list[Case] = []
        self._cases = cases
        self.taken = 0  #: cases handed out so far

    def popleft(self) -> Case:
        with self._lock:
            if self._back:
                self.taken += 1
                return self._back.pop(0)
            case = next(self._cases, None)
            if case is None:
                raise IndexError("no case left")
            self.taken += 1
            return case

    def extend(self, cases: Iterable[Case]) -> None:
        with self._lock:
            self._back.extend(cases)
