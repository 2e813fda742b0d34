"""Write a deterministic N-case benchmark dataset (default 10,000) outside tests/eval/datasets.

The cases are the shipped ``full`` suite's cases repeated under new ids
(``bench-00001`` …): real questions over the sample KB, so every pipeline stage and metric
does its ordinary work. Offline and deterministic: the same N gives the same bytes.

    python scripts/gen_bench_cases.py [--cases 10000] [--out .cache/bench]

prints the path of ``bench_v1.0.jsonl`` it wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "eval" / "datasets" / "full_v1.0.jsonl"


def generate(n: int, out_dir: Path) -> Path:
    rows = [json.loads(line) for line in SOURCE.read_text(encoding="utf-8").splitlines() if line]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "bench_v1.0.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            case = dict(rows[i % len(rows)])
            case["id"] = f"bench-{i + 1:05d}"
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "bench")
    args = ap.parse_args(argv)
    print(generate(args.cases, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
