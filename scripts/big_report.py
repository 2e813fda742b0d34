"""Write an N-case report made of a small real report's cases repeated — for the readers'
benchmarks and tests at 100,000 cases without running 100,000 cases.

    python scripts/big_report.py SRC DEST --cases 100000 [--shift 7]

``SRC`` is any report (``rag eval run`` writes one in a second: ``--suite smoke``). ``DEST``
gets the layout every report of ``rag eval run`` / ``rag eval merge`` has (the summary on
line 1, one case per line: :func:`app.eval.report.io.report_chunks`), case ``i`` being
``SRC``'s case ``i mod len`` with the id ``<id>-<i:06d>`` (unique, in that order), its bad
cases renamed with it and the totals' case counts set to N. ``--shift K`` lowers every K-th
case's judge scores by one point (floor 1) and gives the run another id: the "new" side of a
``rag eval compare`` with something to find. Memory: the source's cases, never N of them
(each output line is the source line's bytes with a new id in front).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _templates(src: Path, shift: bool) -> tuple[dict[str, object], list[tuple[str, bytes]]]:
    """The source's summary (as JSON data) and, per case, its id and its JSON after the id
    (``,"question":…}``); ``shift``: judge scores one point lower (floor 1)."""
    from app.eval.report.io import load_report

    report = load_report(src)
    summary = json.loads(report.model_dump_json(exclude={"cases"}))
    judges = {k for k, v in report.metrics.items() if v.kind == "judge"}
    out: list[tuple[str, bytes]] = []
    for case in report.cases:
        data = json.loads(case.model_dump_json())
        if shift:
            for name in judges & set(data["metrics"]):
                value = data["metrics"][name]["value"]
                if value is not None:
                    data["metrics"][name]["value"] = max(1.0, value - 1.0)
        cid = data.pop("id")
        rest = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        out.append((cid, b"," + rest[1:].encode("utf-8")))
    return summary, out


def write_big_report(src: Path, dest: Path, n: int, shift_every: int = 0) -> Path:
    """Write the ``n``-case report (module docstring) to ``dest``; returns ``dest``."""
    from app.eval.report.io import report_chunks
    from app.eval.report.records import ReportSummary

    summary, plain = _templates(src, False)
    shifted = _templates(src, True)[1] if shift_every else plain
    bad = {b["id"]: b for b in summary["bad_cases"]}  # type: ignore[attr-defined]
    new_bad = []
    for i in range(n):
        old = plain[i % len(plain)][0]
        if old in bad:
            new_bad.append({**bad[old], "id": f"{old}-{i:06d}"})
    summary["bad_cases"] = new_bad
    totals = summary["totals"]
    assert isinstance(totals, dict)
    totals["cases_done"] = totals["cases_planned"] = n
    if shift_every:
        summary["run_id"] = str(summary["run_id"])[:-6] + "bbbbbb"
    head, tail = report_chunks(ReportSummary.model_validate(summary), lambda: ())()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("wb", buffering=1 << 20) as fh:
        fh.write(head)
        for i in range(n):
            rows = shifted if shift_every and i % shift_every == 0 else plain
            cid, rest = rows[i % len(rows)]
            new_id = json.dumps(f"{cid}-{i:06d}", ensure_ascii=False).encode("utf-8")
            fh.write((b",\n" if i else b"") + b'{"id":' + new_id + rest)
        fh.write(tail)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a report whose cases are repeated")
    ap.add_argument("dest", type=Path, help="the report file to write")
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--shift", type=int, default=0, metavar="K", help="shift every K-th case")
    args = ap.parse_args()
    print(write_big_report(args.src, args.dest, args.cases, args.shift))
    return 0


if __name__ == "__main__":
    sys.exit(main())
