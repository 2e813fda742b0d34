"""Fresh-clone benchmark (issue 29): `make eval`'s run in a new clone, with nothing cached.

Clones this checkout's HEAD into a temporary folder (``git clone``: committed files only, so
no ``.cache/`` — no vector cache, no response cache, no jieba dictionary) and runs
``rag eval run --suite smoke --gate red-lines --quiet`` there (what ``make eval`` runs), in a
process of its own with every ``RAG_*`` variable removed. Rows:

* the run's own time, as its summary line prints it (``… · 9.2s · …``): target ≤ 8 s;
* texts embedded by the run (the vector cache's misses, counted in the child at exit):
  target 0 — the shipped vectors (``app/retrieval/vectors/``) hold every one;
* the whole process, start to exit (a figure, no target).

    python scripts/bench_fresh.py [--limit N] [--strict]
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
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
from benchrows import row  # noqa: E402

TARGET_RUN_S = 8.0

_CHILD = (
    "import atexit, sys\n"
    "from app.retrieval import embed as E\n"
    "atexit.register(lambda: print('EMBEDDED', sum(c.misses for c in E._SHARED.values()),"
    " file=sys.stderr))\n"
    "from app.cli import main\n"
    "main(sys.argv[1:])\n"
)


def fresh_copy(dest: Path) -> None:
    """A ``git clone`` of HEAD; outside a git checkout (a copied tree) a copy of it without
    ``.cache/``, ``.venv/``, ``reports/`` or ``node_modules/``."""
    inside = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inside.returncode == 0 and Path(inside.stdout.strip()).resolve() == ROOT:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
        return
    import shutil

    skip = shutil.ignore_patterns(".cache", ".venv", "reports", "node_modules", ".git", "site")
    shutil.copytree(ROOT, dest, ignore=skip, symlinks=True)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="run only N cases (a quick check)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    print(f"load average (1/5/15 min) at start {load()} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-fresh-") as name:
        clone = Path(name) / "clone"
        fresh_copy(clone)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
        env["PYTHONPATH"] = str(clone)
        cmd = [sys.executable, "-c", _CHILD, "eval", "run", "--suite", "smoke"]
        cmd += ["--gate", "red-lines", "--quiet"]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"bench_fresh: the run exited {proc.returncode}")
    took = re.search(r"cases · .*? · ([0-9.]+)s ·", proc.stdout)
    embedded = re.search(r"^EMBEDDED (\d+)$", proc.stderr, re.MULTILINE)
    if took is None or embedded is None:
        raise SystemExit("bench_fresh: no run time or embedding count in the run's output")
    run_s, n = float(took.group(1)), int(embedded.group(1))
    misses = []
    ok = run_s <= TARGET_RUN_S
    print(
        f"  the run itself  {run_s:.1f} s  target <= {TARGET_RUN_S:.0f} s  {'ok' if ok else 'MISS'}"
    )
    row(
        "fresh",
        "fresh clone, `make eval`'s run: time in the run itself",
        f"≤ {TARGET_RUN_S:.0f} s",
        f"{run_s:.1f} s",
        ok,
        run_s / TARGET_RUN_S,
    )
    if not ok:
        misses.append(f"run {run_s:.1f} s > {TARGET_RUN_S:.0f} s")
    ok = n == 0
    print(f"  texts embedded  {n}  target 0  {'ok' if ok else 'MISS'}")
    row("fresh", "fresh clone: texts embedded (shipped vectors)", "0", str(n), ok)
    if not ok:
        misses.append(f"{n} text(s) embedded")
    print(f"  the whole process  {wall:.1f} s  (load {load()})")
    row("fresh", "fresh clone: the whole process, start to exit", "—", f"{wall:.1f} s", None)
    print("targets: " + ("all met" if not misses else "MISSED: " + "; ".join(misses)))
    return 1 if misses and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
