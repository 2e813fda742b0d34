"""``rag view``'s run page at any size: an index of a run's case rows, built once, on disk.

The run page does not embed its case rows: its table asks the server for one page at a time
(``/run/<run>/rows?…``), filtered, searched and sorted by the server the way ``static/view.js``
does it in the browser for an embedded table. What the server reads is a :class:`RunIndex`,
built by one streaming pass over the report (:func:`app.view.stream.read_cases`: the cases
checked as ``rag report html`` checks them) and kept beside it in ``.rag-view/`` (else under
``$RAG_CACHE_DIR/view/``), keyed by the report's name, size and modification time (a changed
report gets a new index, the old one is removed)::

    rows.jsonl   one table row per case (:func:`app.view.casedata.case_row`, no link), in file order
    hay.txt      per case, its searchable text lower-cased (id, question, answer, why, tags)
    cols.npz     per case: each sortable value (metrics, cost, latency, errors; NaN: none),
                 codes of difficulty / verdict / outcome, the id's rank, the tags as lists of
                 rows, byte offsets of its row, its search text and its line in the report
    meta.json    the names behind the codes, the metric names, the row facts of the page

In memory the server keeps the columns only (a few numbers per case); a page reads its 50
rows from ``rows.jsonl`` by offset, a search scans ``hay.txt``. A case page reads its one
line of the report (by offset) instead of the whole report.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from app.errors import ReportError
from app.eval.report.records import ReportSummary
from app.view.casedata import Extras, RowFacts, case_row

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["EMBED_ROWS", "INDEX_VERSION", "Page", "RunIndex", "index_dir", "open_index"]

INDEX_VERSION = "1"
PAGE = 50
#: a run of at most this many cases has its rows embedded in its page (filtered in the
#: browser, no request per page); a larger one is paged by the server
EMBED_ROWS = 5000
_SEP = "\x1f"  # between a case's search fields: no query can hold it (nor a line break)
_ENC = msgspec.json.Encoder()
_FLOAT = re.compile(r"\s*([+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))")


def index_dir(report: Path) -> Path:
    """Where the index of ``report`` as it is now (size, modification time) is kept: in
    ``.rag-view/`` beside it, or under ``$RAG_CACHE_DIR/view/`` when that folder cannot be
    written."""
    st = report.stat()
    name = f"{report.name}.{st.st_size}-{st.st_mtime_ns}-v{INDEX_VERSION}"
    beside = report.parent / ".rag-view"
    if os.access(report.parent, os.W_OK) or os.access(beside, os.W_OK):
        return beside / name
    from app.paths import cache_dir

    where = hashlib.sha256(str(report.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    return cache_dir() / "view" / where[:24] / name


def parse_float(text: str) -> float | None:
    """JavaScript's ``parseFloat`` (a number prefix; ``None`` for NaN), as the browser
    table reads its min/max boxes."""
    m = _FLOAT.match(text)
    if m is None:
        return None
    num = m.group(1)
    return float(num.replace("Infinity", "inf"))


@dataclass(frozen=True)
class Page:
    rows: list[dict[str, Any]]
    shown: int  # rows that pass the filters
    total: int
    page: int
    pages: int


class RunIndex:
    """A run's case index (module docstring), its columns in memory."""

    def __init__(self, folder: Path, report: Path) -> None:
        self.folder = folder
        self.report = report
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        self.meta = meta
        self.total: int = meta["total"]
        self.metrics: list[str] = meta["metrics"]
        self.difficulties: list[str] = meta["difficulties"]
        self.verdicts: list[str] = meta["verdicts"]
        self.outcomes: list[str] = meta["outcomes"]
        self.tags: list[str] = meta["tags"]
        self.lang: str = meta["lang"]
        with np.load(folder / "cols.npz") as z:
            self.cols: dict[str, NDArray[Any]] = {k: z[k] for k in z.files}

    @property
    def facts(self) -> RowFacts:
        return RowFacts(
            tags=set(self.tags),
            difficulties=set(self.difficulties),
            total=self.total,
            lang_of=self.lang,
        )

    # ------------------------------------------------------------ rows

    def _rows(self, which: NDArray[np.intp]) -> list[dict[str, Any]]:
        out = []
        starts = self.cols["row_at"]
        with open(self.folder / "rows.jsonl", "rb") as fh:
            for i in which.tolist():
                fh.seek(int(starts[i]))
                out.append(json.loads(fh.readline()))
        return out

    def _search(self, query: str) -> NDArray[np.bool_]:
        keep = np.zeros(self.total, dtype=bool)
        with open(self.folder / "hay.txt", encoding="utf-8", errors="surrogatepass") as fh:
            for i, line in enumerate(fh):
                if query in line:
                    keep[i] = True
        return keep

    def _mask(self, f: Mapping[str, str]) -> NDArray[np.bool_]:
        c = self.cols
        keep = np.ones(self.total, dtype=bool)
        if tag := f.get("tag", ""):
            on = np.zeros(self.total, dtype=bool)
            if tag in self.tags:
                k = self.tags.index(tag)
                ptr = c["tag_ptr"]
                on[c["tag_rows"][ptr[k] : ptr[k + 1]]] = True
            keep &= on
        if diff := f.get("difficulty", ""):
            code = self.difficulties.index(diff) if diff in self.difficulties else -2
            keep &= c["difficulty"] == code
        if outcome := f.get("outcome", ""):
            code = self.outcomes.index(outcome) if outcome in self.outcomes else -2
            keep &= c["outcome"] == code
        if verdict := f.get("verdict", ""):
            if verdict == "bad":
                ok = self.verdicts.index("ok") if "ok" in self.verdicts else -2
                keep &= c["verdict"] != ok
            elif verdict == "errors":
                keep &= c["errors"] > 0
            else:
                code = self.verdicts.index(verdict) if verdict in self.verdicts else -2
                keep &= c["verdict"] == code
        metric = f.get("metric", "")
        if metric:
            values = self._values(metric)
            lo_s, hi_s = f.get("min", ""), f.get("max", "")
            none = np.isnan(values)
            if lo_s != "" or hi_s != "":
                keep &= ~none
            lo, hi = parse_float(lo_s), parse_float(hi_s)
            with np.errstate(invalid="ignore"):
                if lo is not None:
                    keep &= none | ~(values < lo)
                if hi is not None:
                    keep &= none | ~(values > hi)
        query = f.get("q", "").strip().lower()
        if query:
            keep &= self._search(query)
        return keep

    def _values(self, key: str) -> NDArray[np.float64]:
        """The column a table key sorts and filters on (NaN: no value); missing → all NaN."""
        c = self.cols
        if key in self.metrics:
            return c[f"m{self.metrics.index(key)}"].astype(float)
        if key in ("cost", "latency_ms", "errors"):
            return c[key].astype(float)
        if key in ("difficulty", "verdict", "outcome"):
            codes = c[key].astype(float)
            codes[codes < 0] = np.nan
            return codes
        if key == "id":
            return c["id_rank"].astype(float)
        return np.full(self.total, np.nan)

    def page(self, f: Mapping[str, str], href: Any) -> Page:
        """Page ``f["page"]`` (from 0) of the rows passing the filters in ``f`` (``tag``,
        ``difficulty``, ``verdict``, ``outcome``, ``metric`` + ``min``/``max``, ``q``), sorted
        by ``f["sort"]`` (a column; ties and no-data rows as the browser table orders them)
        in direction ``f["dir"]`` (1 or -1); ``href(case id)`` → each row's link."""
        keep = np.flatnonzero(self._mask(f))
        key = f.get("sort", "id") or "id"
        direction = -1.0 if f.get("dir", "1") == "-1" else 1.0
        values = self._values(key)[keep]
        none = np.isnan(values)
        primary = np.where(none, 0.0, values * direction)
        order = np.lexsort((self.cols["id_rank"][keep], primary, none))
        shown = len(keep)
        pages = max(1, math.ceil(shown / PAGE))
        try:
            number = int(f.get("page", "0") or 0)
        except ValueError:
            number = 0
        number = min(max(number, 0), pages - 1)
        which = keep[order[number * PAGE : (number + 1) * PAGE]]
        rows = self._rows(which)
        for row in rows:
            row["href"] = href(row["id"])
        return Page(rows=rows, shown=shown, total=self.total, page=number, pages=pages)

    def all_rows(self, href: Any) -> list[dict[str, Any]]:
        """Every row in file order, linked (a run small enough to embed in its page)."""
        rows = self._rows(np.arange(self.total))
        for row in rows:
            row["href"] = href(row["id"])
        return rows

    # ------------------------------------------------------------ one case

    @property
    def line_layout(self) -> bool:
        """The report is in the line layout: a case is read from its own line."""
        return bool(self.total == 0 or self.cols["line_at"][0] >= 0)

    def case_line(self, case_id: str) -> bytes | None:
        """The report's JSON of case ``case_id`` (None: no such case, or not line layout)."""
        from app.eval.report.stream import read_case_at

        at = self.cols["line_at"]
        want = _id_hash(case_id)
        for i in np.flatnonzero(self.cols["id_hash"] == want).tolist():
            if at[i] < 0:
                return None
            raw, _ = read_case_at(self.report, int(at[i]))
            if msgspec.json.decode(raw, type=_IdOnly).id == case_id:
                return raw
        return None


class _IdOnly(msgspec.Struct):
    id: str


def _id_hash(case_id: str) -> int:
    digest = hashlib.blake2b(case_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _encode(row: Mapping[str, Any]) -> bytes:
    """Compact JSON of a row; text that is not valid Unicode as U+FFFD (app/wellformed.py)."""
    try:
        return _ENC.encode(row)
    except UnicodeEncodeError:
        from app.wellformed import clean_data

        return _ENC.encode(clean_data(msgspec.to_builtins(row))[0])


def _hay(row: Mapping[str, Any]) -> str:
    text = _SEP.join(
        [row["id"], row["q"], row["a"], "", "", " ".join(row["why"]), " ".join(row["tags"])]
    )
    return text.replace("\r", _SEP).replace("\n", _SEP).lower()


def build(report: Path, folder: Path) -> None:
    """Write the index of ``report`` into ``folder`` (a new folder swapped in whole)."""
    from app.eval.report.stream import NotLineLayout, decode_case, line_report
    from app.view.stream import Case, _bits, _check, read_cases

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        offsets: list[int] = []
        try:
            summary, lines = line_report(report, offsets=offsets)
            seen: set[str] = set()

            def cases() -> Any:
                for n, raw in lines:
                    where = f"{report}:{n}"
                    case = Case(raw, decode_case(raw, report, n), _bits(raw, where))
                    _check(where, case, seen, summary.sent_texts)
                    yield case

            stream = cases()
        except NotLineLayout:
            whole = read_cases(report)
            summary, stream = whole.summary, iter(whole.cases)
        _write(summary, stream, offsets, tmp)
        stem = folder.name.rsplit(".", 1)[0] + "."  # <report name>.: its other versions
        for old in folder.parent.iterdir():
            version = old.name[len(stem) :].split("-")[0]
            if old.name.startswith(stem) and old != folder and version.isdigit() and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)  # an older version's index
        try:
            tmp.rename(folder)
        except OSError:  # built meanwhile by another request: theirs is the same
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write(summary: ReportSummary, stream: Any, offsets: list[int], tmp: Path) -> None:
    """Write the index files of the cases of ``stream`` into ``tmp``. Per case only numbers
    are gathered (``array`` columns, codes for the categories) besides its id, for the
    ids' sort order."""
    extras = Extras(summary)
    metrics = list(summary.metrics)
    facts = RowFacts()
    nums = [array("d") for _ in metrics]
    cost, latency = array("d"), array("d")
    errors, id_hash, row_at, hay_at = array("q"), array("q"), array("q"), array("q")
    cats: dict[str, dict[str, int]] = {"difficulty": {}, "verdict": {}, "outcome": {}}
    codes = {key: array("i") for key in cats}
    ids: list[str] = []
    tag_rows: dict[str, array[int]] = {}
    nan = float("nan")
    with open(tmp / "rows.jsonl", "wb") as rows, open(tmp / "hay.txt", "wb") as hay:
        for i, case in enumerate(stream):
            cid = case.lean.id
            row = case_row(case.lean, case.trace, "", extras.bad.get(cid), metrics)
            del row["href"]
            facts.add(row)
            row_at.append(rows.tell())
            rows.write(_encode(row) + b"\n")
            hay_at.append(hay.tell())
            hay.write(_hay(row).encode("utf-8", "surrogatepass") + b"\n")
            m = row["m"]
            for j, name in enumerate(metrics):
                v = m[name]
                nums[j].append(nan if v is None else v)
            cost.append(row["cost"])
            latency.append(nan if row["latency_ms"] is None else row["latency_ms"])
            errors.append(row["errors"])
            for key, seen in cats.items():
                value = row[key]
                codes[key].append(-1 if value is None else seen.setdefault(value, len(seen)))
            ids.append(cid)
            id_hash.append(_id_hash(cid))
            for tag in row["tags"]:
                tag_rows.setdefault(tag, array("q")).append(i)
    total = len(ids)
    names: dict[str, list[str]] = {}
    cols: dict[str, NDArray[Any]] = {}
    for key, seen in cats.items():  # first-seen codes → codes in sorted order
        names[key] = sorted(seen)
        remap = np.array([names[key].index(v) for v in seen] + [-1], dtype=np.int32)
        cols[key] = remap[np.frombuffer(codes[key], dtype=np.int32)] if total else remap[:0]
    rank = np.empty(total, dtype=np.int64)
    rank[sorted(range(total), key=ids.__getitem__)] = np.arange(total)
    del ids
    tags = sorted(tag_rows)
    ptr = np.zeros(len(tags) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(tag_rows[t]) for t in tags])
    every = [np.frombuffer(tag_rows[t], dtype=np.int64) for t in tags]
    cols.update(
        {f"m{j}": np.frombuffer(col, dtype=float) for j, col in enumerate(nums)},
        cost=np.frombuffer(cost, dtype=float),
        latency_ms=np.frombuffer(latency, dtype=float),
        errors=np.frombuffer(errors, dtype=np.int64),
        id_rank=rank,
        id_hash=np.frombuffer(id_hash, dtype=np.int64),
        row_at=np.frombuffer(row_at, dtype=np.int64),
        hay_at=np.frombuffer(hay_at, dtype=np.int64),
        line_at=np.array(offsets if len(offsets) == total else [-1] * total, dtype=np.int64),
        tag_ptr=ptr,
        tag_rows=np.concatenate(every) if every else np.zeros(0, dtype=np.int64),
    )
    np.savez(tmp / "cols.npz", **cols)  # type: ignore[arg-type]
    meta = {
        "version": INDEX_VERSION,
        "total": total,
        "metrics": metrics,
        "difficulties": names["difficulty"],
        "verdicts": names["verdict"],
        "outcomes": names["outcome"],
        "tags": tags,
        "lang": facts.lang,
    }
    (tmp / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")


def open_index(report: Path) -> RunIndex:
    """The index of ``report``: read from the cache, else built (one pass) and cached.
    A report that cannot be read raises :class:`~app.errors.ReportError`."""
    folder = index_dir(report)
    if not (folder / "meta.json").is_file():
        try:
            build(report, folder)
        except OSError as exc:
            raise ReportError(
                f"{report}: its viewer index cannot be written in {folder.parent} ({exc}); "
                "free some space there or make the reports folder writable"
            ) from None
    try:
        return RunIndex(folder, report)
    except (OSError, ValueError, KeyError) as exc:  # a damaged cache: rebuilt once
        shutil.rmtree(folder, ignore_errors=True)
        try:
            build(report, folder)
            return RunIndex(folder, report)
        except (OSError, ValueError, KeyError):
            raise ReportError(f"{report}: its viewer index cannot be written ({exc})") from None
