"""Start-up benchmark (issue 29): the peer job's start to its first request, its peak RSS, and
the modules loaded by then — rag against the bare asyncio + openai loop.

The peer job of ``bench_bareloop.py`` (N cases × answer + judge against the local mock at
``--latency``, concurrency 16, ``--retriever bm25``): each contender runs as one process
through a small launcher that hooks ``socket.connect``. At the first connection to the mock
it writes the wall clock, ``len(sys.modules)`` and the RSS so far; at exit the peak RSS
(``ru_maxrss``). The time from just before the process was spawned to its first connection
is its start-up (interpreter, imports, reading the suite and the knowledge base, the
preflight — everything before a request leaves). Interleaved rounds (bare, rag, rag, bare,
…), medians judged:

* start to first request, rag − bare: ≤ +0.2 s;
* peak RSS, rag ÷ bare: ≤ 1.4×;
* modules imported at the first request (rag, bare): a figure; deterministic, so it shows
  an import made lazy even on a loaded machine (``python -X importtime`` names them).

    python scripts/bench_startup.py [--rounds 5] [--cases 200] [--latency 0.2] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
from bench_bareloop import BARE, child_env, dataset, load, rag_cmd  # noqa: E402
from benchrows import row  # noqa: E402

from tests.support.fake_llm_server import FakeServerProcess as Mock  # noqa: E402

TARGET_START_S, TARGET_RSS_RATIO = 0.2, 1.4

# the launcher: argv = [out.json, port, "rag" | "bare", args…]
_LAUNCH = r"""
import atexit, json, resource, socket, sys, time
out, port, who, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
seen = {}
real = socket.socket.connect

def connect(self, address, *rest):
    if not seen and isinstance(address, tuple) and len(address) > 1 and address[1] == port:
        seen.update(first=time.time(), modules=len(sys.modules),
                    rss_first_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return real(self, address, *rest)

socket.socket.connect = connect

def done():
    seen["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(out, "w", encoding="utf-8") as f:
        json.dump(seen, f)

atexit.register(done)
if who == "rag":
    import runpy
    sys.argv = ["rag", *args]
    runpy.run_module("app", run_name="__main__", alter_sys=True)
else:
    sys.argv = ["bare", *args[1:]]
    exec(compile(args[0], "<bare loop>", "exec"), {"__name__": "__main__"})
"""


@dataclass
class Start:
    to_first: float  # seconds from spawning the process to its first request
    modules: int  # len(sys.modules) at that moment
    rss_first_mb: float
    peak_mb: float


def launch(who: str, args: list[str], env: dict[str, str], mock: Mock, tmp: Path) -> Start:
    out = tmp / f"start-{who}.json"
    out.unlink(missing_ok=True)
    port = mock.url.rsplit(":", 1)[1]
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCH, str(out), port, who, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1) or "Traceback" in proc.stderr or not out.exists():
        raise SystemExit(f"{who} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    got = json.loads(out.read_text(encoding="utf-8"))
    if "first" not in got:
        raise SystemExit(f"{who}: no request reached the mock")
    return Start(got["first"] - started, got["modules"], got["rss_first_mb"], got["peak_mb"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; median judged")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    n, c = args.cases, args.concurrency
    print(f"load average (1/5/15 min) at start {load()} on {os.cpu_count()} CPUs")
    misses: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as name:
        tmp = Path(name)
        env = child_env(tmp)
        ds = dataset(tmp, n)
        mock = Mock(args.latency, responder="bench")
        try:
            base = f"{mock.url}/v1"
            bare_args = [BARE, base, str(n), str(c), str(ds)]
            rag_args = rag_cmd(mock, ds, tmp / "out", c)[1:]  # without the `rag` program
            launch("bare", bare_args, env, mock, tmp)  # warm-up: bytecode, page cache
            launch("rag", rag_args, env, mock, tmp)
            runs: dict[str, list[Start]] = {"bare": [], "rag": []}
            for i in range(max(1, args.rounds)):
                order = [("bare", bare_args), ("rag", rag_args)]
                for who, a in order if i % 2 == 0 else order[::-1]:
                    runs[who].append(launch(who, a, env, mock, tmp))
                r, b = runs["rag"][-1], runs["bare"][-1]
                print(
                    f"  round {i + 1}: to first request rag {r.to_first:.2f} s, bare "
                    f"{b.to_first:.2f} s; peak RSS rag {r.peak_mb:.0f} MB, bare "
                    f"{b.peak_mb:.0f} MB  (load {load()})"
                )
        finally:
            mock.close()
    rag, bare = runs["rag"], runs["bare"]
    extra = statistics.median(r.to_first - b.to_first for r, b in zip(rag, bare, strict=True))
    ok = extra <= TARGET_START_S
    print(
        f"  start to first request, rag − bare (median)  {extra:+.2f} s  target <= "
        f"+{TARGET_START_S} s  {'ok' if ok else 'MISS'}  (bare median "
        f"{statistics.median(b.to_first for b in bare):.2f} s)"
    )
    row(
        "startup",
        f"start to first request, rag − the bare loop ({n} cases, median of {len(rag)} rounds)",
        f"≤ +{TARGET_START_S} s",
        f"{extra:+.2f} s",
        ok,
        max(extra, 0.0) / TARGET_START_S,
    )
    if not ok:
        misses.append(f"start-up {extra:+.2f} s > +{TARGET_START_S}")
    ratio = statistics.median(r.peak_mb for r in rag) / statistics.median(b.peak_mb for b in bare)
    ok = ratio <= TARGET_RSS_RATIO
    print(
        f"  peak RSS rag ÷ bare (medians)  {ratio:.2f}×  target <= {TARGET_RSS_RATIO}×  "
        f"{'ok' if ok else 'MISS'}  (rag {statistics.median(r.peak_mb for r in rag):.0f} MB, "
        f"bare {statistics.median(b.peak_mb for b in bare):.0f} MB; at the first request rag "
        f"{statistics.median(r.rss_first_mb for r in rag):.0f} MB)"
    )
    row(
        "startup",
        "peak RSS, rag ÷ the bare loop",
        f"≤ {TARGET_RSS_RATIO}×",
        f"{ratio:.2f}×",
        ok,
        ratio / TARGET_RSS_RATIO,
    )
    if not ok:
        misses.append(f"peak RSS ratio {ratio:.2f} > {TARGET_RSS_RATIO}")
    modules = f"rag {rag[0].modules}, bare {bare[0].modules}"
    print(f"  modules imported at the first request: {modules}")
    row("startup", "modules imported when the first request leaves", "—", modules, None)
    print(f"load average at end {load()}")
    print("targets: " + ("all met" if not misses else "MISSED: " + "; ".join(misses)))
    return 1 if misses and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
