"""Benchmark: the readers of a 100,000-case report (issue 29), each a whole process.

Two N-case reports (default 100,000) are written by ``scripts/big_report.py`` from an
offline smoke run's report (its cases repeated with unique ids; the second with every 7th
case's judge scores one point lower), in the layout ``rag eval run`` writes. Rows:

* ``rag eval compare A B``: wall time (target ≤ 8 s), CPU time, peak RSS;
* ``rag view``'s run page of A, first paint: the page's HTTP response plus its first rows
  request (``/run/<run>/rows?page=0``), in a new server process with the run's index on
  disk (target ≤ 2 s); and the first open ever, which builds that index in one pass over the
  report (a figure), with the server's peak RSS;
* ``rag report html A``: wall time, peak RSS (figures: the issue sets no target).

    python scripts/bench_readers.py [--cases N] [--strict]

Only the full size (100,000) is judged against the targets; the load average is printed
(the machine may be shared: a timing on a loaded machine says little).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
from benchrows import row as page_row  # noqa: E402

BIN = Path(sys.executable).parent
RAG = str(BIN / "rag") if (BIN / "rag").exists() else "rag"
FULL = 100_000
TARGETS = {"compare_s": 8.0, "first_paint_s": 2.0}

_WRAP = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "t = time.perf_counter() - t\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(t, u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)\n"
)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one child process."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAP, *cmd], capture_output=True, env=env, cwd=ROOT, text=True
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    wall, cpu, rss = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), float(cpu), int(rss) / 1024


def report(
    name: str, value: float, unit: str, key: str | None, full: bool, misses: list[str]
) -> None:
    if key is None or not full:
        print(
            f"  {name}: {value:.2f} {unit} (no target{'' if full else ' at this size'}; load {load()})"
        )
        page_row("readers", name, "—", f"{value:.2f} {unit}", None)
        return
    target = TARGETS[key]
    ok = value <= target
    page_row("readers", name, f"≤ {target:g} {unit}", f"{value:.2f} {unit}", ok, value / target)
    print(
        f"  {name}: {value:.2f} {unit}; target ≤ {target:g}; {'MET' if ok else 'MISS'} (load {load()})"
    )
    if not ok:
        misses.append(name)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as r:
        return bytes(r.read())


def viewer(folder: Path, run_id: str, env: dict[str, str]) -> tuple[float, float]:
    """(seconds for the run page + its first rows request, the server's peak RSS MB) of a
    new ``rag view`` process."""
    proc = subprocess.Popen(
        [RAG, "view", str(folder), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://[\d.]+:\d+", line)
        if match is None:
            raise SystemExit(f"rag view did not start: {line!r}")
        url = match.group(0)
        _get(url + "/")  # the runs list (summaries): before the clock, as a user would
        t = time.perf_counter()
        html = _get(f"{url}/run/{run_id}").decode("utf-8")
        spec = re.search(r'id="table-spec">(.*?)</script>', html, re.S)
        assert spec is not None
        rows_url = json.loads(spec.group(1)).get("rows_url")
        if rows_url:
            first = json.loads(_get(url + rows_url + "?page=0&sort=id&dir=1"))
            assert first["rows"], first
        seconds = time.perf_counter() - t
        status = Path(f"/proc/{proc.pid}/status")
        rss = 0.0
        if status.exists():
            hwm = re.search(r"VmHWM:\s+(\d+) kB", status.read_text())
            rss = int(hwm.group(1)) / 1024 if hwm else 0.0
        return seconds, rss
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    from scripts.big_report import write_big_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=FULL)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    full = args.cases >= FULL
    print(f"load average (1/5/15 min) at start {load()} on {os.cpu_count()} CPUs")
    misses: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-readers-") as name:
        t = Path(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
        env.update(RAG_CACHE_DIR=str(t / "cache"), RAG_LOG_DIR=str(t / "logs"))
        subprocess.run(
            [RAG, "eval", "run", "--suite", "smoke", "--quiet", "--out", str(t / "smoke")],
            env=env,
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        (src,) = (t / "smoke").glob("eval_*.json")
        a = write_big_report(src, t / "runs" / "eval_a.json", args.cases)
        b = write_big_report(src, t / "other" / "eval_b.json", args.cases, shift_every=7)
        n = f"{args.cases:,}"
        print(f"  two {n}-case reports of {a.stat().st_size / 1e6:,.0f} MB each")
        wall, cpu, rss = timed([RAG, "eval", "compare", str(a), str(b)], env)
        report(f"rag eval compare of two {n}-case reports", wall, "s", "compare_s", full, misses)
        report("  its CPU time", cpu, "s", None, full, misses)
        report("  its peak RSS", rss, "MB", None, full, misses)
        run_id = json.loads(a.open("rb").readline()[: -len(b',"cases":[\n')] + b"}")["run_id"]
        cold, cold_rss = viewer(a.parent, run_id, env)
        warm, warm_rss = viewer(a.parent, run_id, env)
        report(
            f"rag view run page of {n} cases, first paint (page + first rows; index on disk)",
            warm,
            "s",
            "first_paint_s",
            full,
            misses,
        )
        report("  the server's peak RSS", warm_rss, "MB", None, full, misses)
        report("  first open ever (builds the index: one pass over the report)", cold, "s", None, full, misses)  # fmt: skip
        report("  the server's peak RSS while building it", cold_rss, "MB", None, full, misses)
        wall, cpu, rss = timed(
            [RAG, "report", "html", str(a), "-o", str(t / "html" / "r.html")], env
        )
        report(f"rag report html of a {n}-case report", wall, "s", None, full, misses)
        report("  its peak RSS", rss, "MB", None, full, misses)
    print(f"load average at end: {load()}")
    if misses:
        print(f"readers: {len(misses)} target(s) missed: {', '.join(misses)}")
    return 1 if (args.strict and misses) else 0


if __name__ == "__main__":
    sys.exit(main())
