#!/usr/bin/env python3
"""Generate the JSON Schemas from the pydantic models (``make schema``).

* ``reports/report.schema.json``  ← :class:`app.eval.report.records.Report`
* ``tests/eval/datasets/case.schema.json`` ← :class:`app.eval.datasets.case.Case`

The models are the one source of truth; the files are written for other tools (editors,
``jsonschema``, the dataset checker's messages) and never edited by hand.
``tests/unit/eval/test_schemas.py`` fails when a committed file differs from what this
script generates. ``--check`` exits 1 (listing the stale files) instead of writing.

Usage::

    python scripts/gen_schemas.py           # write both files
    python scripts/gen_schemas.py --check   # exit 1 if a committed file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any folder
    sys.path.insert(0, str(ROOT))

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def report_schema() -> dict[str, Any]:
    from app.eval.report.records import SCHEMA_VERSION, Report

    body = Report.model_json_schema()
    return {
        "$schema": DRAFT,
        "$id": "https://rag-starter.local/schemas/report.schema.json",
        **body,
        "title": "rag-starter evaluation report",
        "description": (
            f"Schema version {SCHEMA_VERSION}, generated from app.eval.report.records.Report by "
            "`make schema` (scripts/gen_schemas.py) — do not edit. Written by `rag eval run` "
            "and `pytest tests/eval`; read with app.eval.report.io.load_report, which also "
            "converts schema version 1. No NaN anywhere: an undefined value is null with a "
            "reason and is excluded from n."
        ),
    }


def case_schema() -> dict[str, Any]:
    from app.eval.datasets.case import case_json_schema

    return case_json_schema()


def targets() -> dict[Path, dict[str, Any]]:
    return {
        ROOT / "reports" / "report.schema.json": report_schema(),
        ROOT / "tests" / "eval" / "datasets" / "case.schema.json": case_schema(),
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, schema in targets().items():
        text = render(schema)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if args.check and stale:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run `make schema`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
