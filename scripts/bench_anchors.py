"""`rag datasets check` on the full suites with anchors resolved, against the same files
without anchors (the check before labels were anchored): target ≤ 1.2×.

Builds two repository roots in a temporary folder — the shipped dataset files as they are
(every label anchored) and the same files with the ``anchors`` field taken out — both on the
shipped KB, then runs ``python -m app datasets check`` in each, alternating, ``--rounds``
times (a new process each time: KB load, chunking, every case checked and, in the first,
every anchor resolved). Prints the medians, their ratio and the load average; take the
figure on an idle machine. Writes nothing outside its temporary folder.

    python scripts/bench_anchors.py [--rounds 7] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchrows import row  # noqa: E402  (scripts/, on sys.path when run as a script)

TARGET = 1.2
DATASETS = ROOT / "tests" / "eval" / "datasets"
KB = ROOT / "tests" / "eval" / "kb"


def _root(base: Path, name: str, *, anchors: bool) -> Path:
    root = base / name
    folder = root / "tests" / "eval" / "datasets"
    folder.mkdir(parents=True)
    (root / "tests" / "eval" / "kb").symlink_to(KB)
    for path in sorted(DATASETS.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if not anchors:
            stripped = []
            for line in lines:
                obj = json.loads(line) if line.strip() else None
                if isinstance(obj, dict):
                    obj.pop("anchors", None)
                    line = json.dumps(obj, ensure_ascii=False)
                stripped.append(line)
            lines = stripped
        (folder / path.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def _check(root: Path) -> float:
    env = {**os.environ, "RAG_ROOT": str(root), "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "app", "datasets", "check"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    spent = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"rag datasets check failed in {root}:\n{proc.stdout[-800:]}")
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args, _ = parser.parse_known_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-anchors-"))
    try:
        plain = _root(base, "plain", anchors=False)
        anchored = _root(base, "anchored", anchors=True)
        before: list[float] = []
        after: list[float] = []
        for _ in range(max(1, args.rounds)):
            before.append(_check(plain))
            after.append(_check(anchored))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    b, a = statistics.median(before), statistics.median(after)
    ratio = a / b
    load = os.getloadavg()
    print(
        f"rag datasets check, every suite, {len(before)} rounds: without anchors median "
        f"{b * 1000:.0f} ms, anchors resolved median {a * 1000:.0f} ms; ratio {ratio:.2f} "
        f"(target ≤ {TARGET})"
    )
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    met = ratio <= TARGET
    row(
        "anchors",
        "check with anchors resolved ÷ without",
        f"≤ {TARGET}×",
        f"{ratio:.2f}×",
        met,
        ratio / TARGET,
    )
    row("anchors", "check without anchors (median)", "", f"{b * 1000:.0f} ms", None)
    row("anchors", "check with anchors resolved (median)", "", f"{a * 1000:.0f} ms", None)
    print("target met" if met else "TARGET MISSED")
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
