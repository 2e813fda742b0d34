"""`make bench`: run every benchmark under scripts/bench_*.py and print their ratios.

Arguments are passed on to every benchmark: ``python scripts/bench.py --strict`` exits 1
when any of them misses a target.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    benches = sorted(HERE.glob("bench_*.py"))
    if not benches:
        print("no benchmarks found under scripts/bench_*.py")
        return 0
    worst = 0
    for bench in benches:
        print(f"== {bench.stem} ==", flush=True)
        rc = subprocess.call([sys.executable, str(bench), *sys.argv[1:]])
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    sys.exit(main())
