"""The rows of the benchmarks page: what each benchmark measured against its target.

A benchmark calls :func:`row` where it judges a target (or prints a figure worth a row);
when ``scripts/bench.py --markdown`` runs it, ``$RAG_BENCH_ROWS`` names a JSONL file and
each row is appended there, then rendered into ``docs/benchmarks.md``. Run alone, a
benchmark prints as before and :func:`row` does nothing.

Not named ``bench_*.py``: ``scripts/bench.py`` runs every such file as a benchmark.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "RAG_BENCH_ROWS"


def row(
    bench: str,
    what: str,
    target: str,
    measured: str,
    ok: bool | None,
    ratio: float | None = None,
) -> None:
    """One row: ``ok`` None for a figure without a target (shown, never ✅ or ❌);
    ``ratio`` measured ÷ target where that is a number (≤ 1 meets an upper bound)."""
    path = os.environ.get(ENV)
    if not path:
        return
    record = {
        "bench": bench,
        "what": what,
        "target": target,
        "measured": measured,
        "ok": ok,
        "ratio": None if ratio is None else round(float(ratio), 3),
    }
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
