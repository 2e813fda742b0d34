"""Run one dataset file offline through the runner API and print its timings as JSON.

Used by ``scripts/bench_scale.py`` as a child process (so its peak RSS is the run's own):
``python scripts/run_dataset_file.py FILE OUT_DIR [WORKERS]`` (default ``auto``). ``rag eval run`` takes a suite name
only, so the runner's suite loader is pointed at FILE here.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Literal

T0 = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    file, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
    from app.runtime import peak_rss_mb, tune_gc

    tune_gc()  # this script stands in for `rag eval run`: the same process settings
    from app.eval.config import RunConfig
    from app.eval.run import runner

    # the runner asks the suite loader for the suite's path only (then checks and loads that
    # file once): parsing the file here too would bill the run for a second full load
    runner.load_suite = lambda name, *a, **k: SimpleNamespace(path=file)  # type: ignore[assignment]
    last: dict[str, float] = {}

    def on_progress(p: object) -> None:
        if getattr(p, "done", 0) == getattr(p, "total", -1):
            last.setdefault("t", time.perf_counter())

    # --workers (the default: auto, app.eval.run.workers.planned)
    arg = sys.argv[3] if len(sys.argv) > 3 else "auto"
    workers: int | Literal["auto"] = "auto" if arg == "auto" else int(arg)
    cfg = RunConfig(suite=file.stem.split("_v")[0], cache=False, concurrency=16, workers=workers)
    outcome = runner.run_sync(cfg, out_dir=out_dir, on_progress=on_progress, write=True)
    end = time.perf_counter()
    print(
        json.dumps(
            {
                "cases": outcome.summary.totals.cases_done,
                "total_s": end - T0,
                "after_last_s": end - last.get("t", end),
                # every process of the run: this one's peak plus each worker process's
                # (app.eval.run.workers; each reports its own, getrusage's RUSAGE_CHILDREN would
                # give only the largest child's)
                "peak_rss_mb": peak_rss_mb() + sum(outcome.worker_rss_mb),
                "processes": 1 + len(outcome.worker_rss_mb),
                "report": str(outcome.path),
                "calls": outcome.calls,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
