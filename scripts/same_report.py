"""Do two reports mean the same? Every field equal except those that differ between two runs
of the same work by their nature (ids, clocks, latency, the command and git state).

    python scripts/same_report.py BEFORE.json AFTER.json

Used before/after a speed change (issue 14): the report of a run must be identical in every
other field — every case's metrics, answer, trace (retrieval, prompts sent, token counts),
the summary, breakdowns, bad cases, engine counters. Prints each difference (path, both
values) and exits 1 when there is one, 0 when the two mean the same, 2 on a bad argument.
Reads the files with plain ``json`` (any schema version), so it trusts no code under test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: keys ignored wherever they appear: clocks, ids, timings
VOLATILE_KEYS = frozenset({"run_id", "created_at", "trace_id", "latency_s", "latency_ms"})
#: dotted paths ignored: the run's own wall time, how and at which commit it was started
VOLATILE_PATHS = frozenset({"totals.duration_s", "meta.git", "meta.command"})
MAX_SHOWN = 40


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every difference between two JSON values outside the volatile fields."""
    if path.lstrip(".") in VOLATILE_PATHS:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            if key in VOLATILE_KEYS:
                continue
            where = f"{path}.{key}"
            if key not in a or key not in b:
                out.append(f"{where}: only in {'the second' if key not in a else 'the first'}")
                continue
            out.extend(differences(a[key], b[key], where))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out.extend(differences(x, y, f"{path}[{i}]"))
        return out
    if type(a) is not type(b) or a != b:
        return [f"{path}: {a!r:.120} vs {b!r:.120}"]
    return []


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if len(argv) != 2:
        print("usage: python scripts/same_report.py BEFORE.json AFTER.json", file=sys.stderr)
        return 2
    docs = []
    for name in argv:
        try:
            docs.append(json.loads(Path(name).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"{name}: cannot read a JSON report: {exc}", file=sys.stderr)
            return 2
    found = differences(*docs)
    for line in found[:MAX_SHOWN]:
        print(line)
    if len(found) > MAX_SHOWN:
        print(f"… and {len(found) - MAX_SHOWN} more")
    cases = len(docs[0].get("cases", [])) if isinstance(docs[0], dict) else 0
    print(f"{len(found)} difference(s) over {cases} cases" if found else f"same ({cases} cases)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
