"""Edited knowledge-base benchmark (issue 29): a cold smoke run after a sentence is appended
to every knowledge-base document, against the same run with ``--retriever bm25``.

A scratch copy of the sample knowledge base (``tests/eval/kb/sample``, the same folder name,
so the suite's chunk ids still resolve) gets one sentence appended to the end of every
document: each document's last chunk changes, so the vectors shipped with the checkout
(``app/retrieval/vectors/``, still on) hold no vector for it, and the run must embed it.
Each round runs, in its own process and in alternating order:

* **dense** — ``rag eval run --suite smoke --kb <copy> --gate red-lines --no-cache --quiet``
  (``--retriever auto``: hybrid when the local embedder is installed) with an empty vector
  cache folder (``RAG_EMBED_CACHE_DIR``): cold for every changed chunk;
* **bm25** — the same command with ``--retriever bm25``.

Both share one ``RAG_CACHE_DIR`` warmed by a first BM25 run (jieba's dictionary and the
segmentation of the edited documents), so the rounds differ only in the retriever and the
texts it embeds. Row: the median over rounds of wall(dense) ÷ wall(bm25), target ≤ 2.5×;
the CPU ratio (user + sys of the run's process) and the number of texts each dense run
embedded are printed beside it (CPU time is what to compare on a loaded machine).

    python scripts/bench_kbedit.py [--rounds 3] [--limit N] [--docs N] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
from benchrows import row  # noqa: E402

TARGET_RATIO = 2.5
KB = ROOT / "tests" / "eval" / "kb" / "sample"
#: appended to every document (its own sentence at the end of the last paragraph)
SENTENCE = "本文件由知识库管理员于 2026 年 12 月复核，内容如有变更以最新版本为准。"

# the child: one run, then what it embedded (the vector caches' misses) on stderr
_CHILD = (
    "import atexit, sys\n"
    "def _embedded():\n"
    "    E = sys.modules.get('app.retrieval.embed')  # never imported by a BM25 run\n"
    "    n = sum(c.misses for c in getattr(E, '_SHARED', {}).values())\n"
    "    print('EMBEDDED', n, file=sys.stderr)\n"
    "atexit.register(_embedded)\n"
    "from app.cli import main\n"
    "main(sys.argv[1:])\n"
)
# the wrapper: the child's wall time, peak RSS and CPU (RUSAGE_CHILDREN: it alone)
_WRAP = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "t = time.perf_counter() - t\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': p.returncode, 'wall': t, 'rss_mb': u.ru_maxrss / 1024,\n"
    "  'cpu': u.ru_utime + u.ru_stime, 'out': p.stdout[-3000:], 'err': p.stderr[-3000:]}))\n"
)


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    embedded: int


def edited_copy(dest: Path, limit: int | None = None) -> int:
    """The sample knowledge base under ``dest/sample`` with :data:`SENTENCE` appended to the
    last paragraph of every document (of the first ``limit`` ones, in path order, when
    given); returns the number of documents edited."""
    target = dest / KB.name
    shutil.copytree(KB, target)
    n = 0
    for file in sorted(target.rglob("*.md")):
        if file.name.upper() == "README.MD":
            continue
        if limit is not None and n >= limit:
            break
        text = file.read_text(encoding="utf-8").rstrip("\n")
        file.write_text(f"{text}{SENTENCE}\n", encoding="utf-8")
        n += 1
    return n


def child_env(cache: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(RAG_CACHE_DIR=str(cache), PYTHONIOENCODING="utf-8")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache.parent / "pycache")
    return env


def timed(cmd: list[str], env: dict[str, str]) -> Run:
    proc = subprocess.run(
        [sys.executable, "-c", _WRAP, *cmd], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench_kbedit: wrapper failed: {proc.stderr[-2000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if res["rc"] not in (0, 1) or "Traceback" in res["err"]:
        raise SystemExit(f"bench_kbedit: the run exited {res['rc']}:\n{res['err']}{res['out']}")
    found = re.search(r"^EMBEDDED (\d+)$", res["err"], re.MULTILINE)
    return Run(res["wall"], res["cpu"], res["rss_mb"], int(found.group(1)) if found else -1)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; median judged")
    ap.add_argument("--limit", type=int, default=None, help="run only N cases (a quick check)")
    ap.add_argument("--docs", type=int, default=None, help="edit only N documents (a quick check)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    print(f"load average (1/5/15 min) at start {load()} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-kbedit-") as name:
        tmp = Path(name)
        docs = edited_copy(tmp / "kb", args.docs)
        env = child_env(tmp / "cache")
        base = [sys.executable, "-c", _CHILD, "eval", "run", "--suite", "smoke"]
        base += ["--kb", str(tmp / "kb" / KB.name), "--gate", "red-lines", "--no-cache"]
        base += ["--quiet", "--out", str(tmp / "out")]
        if args.limit:
            base += ["--limit", str(args.limit)]
        bm25 = [*base, "--retriever", "bm25"]
        # warm-up: jieba's dictionary, the edited documents' segmentation, bytecode
        timed(bm25, {**env, "RAG_EMBED_CACHE_DIR": str(tmp / "vectors-warmup")})
        dense_runs: list[Run] = []
        bm25_runs: list[Run] = []
        for i in range(max(1, args.rounds)):
            fresh = {**env, "RAG_EMBED_CACHE_DIR": str(tmp / f"vectors-{i}")}  # empty
            pair = [("dense", base), ("bm25", bm25)]
            got: dict[str, Run] = {}
            for who, cmd in pair if i % 2 == 0 else pair[::-1]:
                got[who] = timed(cmd, fresh)
            dense_runs.append(got["dense"])
            bm25_runs.append(got["bm25"])
            d, b = got["dense"], got["bm25"]
            print(
                f"  round {i + 1}: cold dense {d.wall:.2f} s ({d.cpu:.2f} s CPU, "
                f"{d.embedded} texts embedded, {d.rss_mb:.0f} MB)  bm25 {b.wall:.2f} s "
                f"({b.cpu:.2f} s CPU)  ratio {d.wall / b.wall:.2f}×  load {load()}",
                flush=True,
            )
    ratio = statistics.median(d.wall / b.wall for d, b in zip(dense_runs, bm25_runs, strict=True))
    cpu = statistics.median(d.cpu / b.cpu for d, b in zip(dense_runs, bm25_runs, strict=True))
    embedded = statistics.median(d.embedded for d in dense_runs)
    ok = ratio <= TARGET_RATIO
    print(
        f"  cold smoke after an edit ÷ bm25 (median wall)  {ratio:.2f}×  target <= "
        f"{TARGET_RATIO}×  {'ok' if ok else 'MISS'}  (CPU ratio {cpu:.2f}×; {docs} documents "
        f"edited, {embedded:.0f} texts embedded per cold run)"
    )
    row(
        "kbedit",
        f"cold smoke run after a sentence is appended to "
        f"{'every KB document' if args.docs is None else 'only some KB documents'} ({docs}; "
        f"{embedded:.0f} texts embedded) ÷ the same run with `--retriever bm25` (median of "
        f"{len(dense_runs)} rounds; CPU ratio {cpu:.2f}×)",
        f"≤ {TARGET_RATIO}×",
        f"{ratio:.2f}×",
        ok,
        ratio / TARGET_RATIO,
    )
    print(f"load average at end {load()}")
    print("targets: " + ("all met" if ok else f"MISSED: ratio {ratio:.2f} > {TARGET_RATIO}"))
    return 1 if not ok and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
