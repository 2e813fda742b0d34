"""Benchmark: the 100,000-case offline run of issue 29, as the user types it.

``python scripts/gen_cases.py --cases N`` writes the dataset (every shipped suite's cases,
repeated with new ids), then ``rag eval run --dataset FILE --gate red-lines --quiet`` runs
it as a process, with ``--workers auto`` (one process per 1,000 cases, at most one per core:
2 on the reference machine) and again with ``--workers 1``. Rows (targets from issue 29):

* end to end (the ``rag`` process from start to exit, the dataset check and the report
  included; after a 50-case run on the same cache, so no row pays a fresh cache's first
  embeddings): ≤ 150 s with ``--workers auto``; the one-process run's time is information;
* peak RSS summed over the run's processes: every process's own peak (``VmHWM`` in
  ``/proc/<pid>/status``, read every 0.1 s while it lives), summed: ≤ 400 MB for both runs;
* ``rag eval merge`` of the run's two shards (``--shard 1/2``, ``2/2``, run one after the
  other with ``--workers 1`` when ``--merge`` is given; not a target row).

``--cases N`` runs fewer cases (the targets are for 100,000: a smaller run prints no
verdict). ``--strict`` exits 1 on a miss. The load average is printed: the machine is
shared, and only rows measured in the same run compare.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchrows import row as page_row  # noqa: E402  (scripts/, on sys.path when run as a script)

BIN = Path(sys.executable).parent
RAG = str(BIN / "rag") if (BIN / "rag").exists() else "rag"
FULL = 100_000

TARGETS = {  # issue 29
    "run_total_s": 150.0,
    "run_peak_rss_mb": 400.0,
}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _hwm_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(m.group(1)) / 1024 if m else None


def run_tree(cmd: list[str], env: dict[str, str]) -> tuple[float, dict[int, float], int]:
    """(seconds, each process's peak RSS in MB, exit code) of ``cmd`` and its descendants:
    every process's ``VmHWM`` (its own peak, kept by the kernel) read every 0.1 s."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    peaks: dict[int, float] = {}
    while proc.poll() is None:
        todo = [proc.pid]
        while todo:
            pid = todo.pop()
            hwm = _hwm_mb(pid)
            if hwm is not None:
                peaks[pid] = max(peaks.get(pid, 0.0), hwm)
            todo.extend(_children(pid))
        time.sleep(0.1)
    return time.perf_counter() - started, peaks, proc.returncode


def row(name: str, value: float, unit: str, key: str | None, misses: list[str]) -> None:
    what = re.sub(r";? ?load [\d.]+", "", name.strip())
    if key is None:
        print(f"  {name}: {value:.2f} {unit} (no target; load {_load()})")
        page_row("scale100k", what, "—", f"{value:.2f} {unit}", None)
        return
    target = TARGETS[key]
    ok = value <= target
    page_row("scale100k", what, f"≤ {target:g} {unit}", f"{value:.2f} {unit}", ok, value / target)
    print(
        f"  {name}: {value:.2f} {unit}; target ≤ {target:g}; ratio {value / target:.2f} "
        f"{'MET' if ok else 'MISS'} (load {_load()})"
    )
    if not ok:
        misses.append(name)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--cases", type=int, default=FULL)
    ap.add_argument("--merge", action="store_true", help="also run two shards and merge them")
    args, _ = ap.parse_known_args()  # bench.py passes every benchmark the same arguments
    full = args.cases >= FULL
    print(f"load average at start: {_load()} on {os.cpu_count()} cores")
    misses: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(RAG_CACHE_DIR=str(t / "cache"), PYTHONPYCACHEPREFIX=str(t / "pycache"))
        gen = [sys.executable, str(ROOT / "scripts" / "gen_cases.py"), "--cases", str(args.cases)]
        subprocess.run([*gen, "--out", str(t / "data")], check=True, capture_output=True)
        (dataset,) = (t / "data").glob("*.jsonl")
        size = dataset.stat().st_size / 1e6
        base = [RAG, "eval", "run", "--dataset", str(dataset), "--gate", "red-lines", "--quiet"]
        # a first short run fills this temp cache (the vectors and segmentation a fresh
        # cache lacks: the fresh-clone cost is bench_fresh's row, not this one's)
        run_tree([*base, "--limit", "50", "--workers", "1", "--out", str(t / "warm")], env)
        for workers in ("auto", "1"):
            out = t / f"out-{workers}"
            secs, peaks, rc = run_tree([*base, "--workers", workers, "--out", str(out)], env)
            if rc not in (0, 1):
                raise SystemExit(f"rag eval run --workers {workers} exited {rc}")
            (report,) = out.glob("eval_*.json")
            print(
                f"  {args.cases:,}-case offline run, --workers {workers} ({len(peaks)} "
                f"process(es); dataset {size:.0f} MB, report {report.stat().st_size / 1e6:.0f} MB)"
            )
            label = f"{args.cases:,}-case offline run, --workers {workers}"
            timed_key = "run_total_s" if full and workers == "auto" else None
            row(f"{label}: end to end", secs, "s", timed_key, misses)
            row(
                f"{label}: peak RSS, every process's peak summed",
                sum(peaks.values()),
                "MB",
                "run_peak_rss_mb" if full else None,
                misses,
            )
        if args.merge:
            shards = []
            for i in (1, 2):
                out = t / f"shard-{i}"
                cmd = [*base, "--workers", "1", "--shard", f"{i}/2", "--out", str(out)]
                run_tree(cmd, env)
                shards.extend(str(p) for p in out.glob("eval_*.json"))
            merge = [RAG, "eval", "merge", *shards, "--out", str(t / "merged")]
            secs, peaks, rc = run_tree(merge, env)
            if rc not in (0, 1):
                raise SystemExit(f"rag eval merge exited {rc}")
            row(f"rag eval merge of 2 shards of {args.cases:,} cases", secs, "s", None, misses)
            row("  its peak RSS", sum(peaks.values()), "MB", None, misses)
    print(f"load average at end: {_load()} (machine shared by other workers)")
    if misses:
        print(f"scale100k: {len(misses)} target(s) missed: {', '.join(misses)}")
    return 1 if (args.strict and misses) else 0


if __name__ == "__main__":
    sys.exit(main())
