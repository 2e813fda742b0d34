"""The chaos benchmark's fast variant (issue 12): ~200 cases against the fault-injecting
server, with a ``kill -9`` in the middle and ``--resume``: no crash, no lost case.

The full benchmark (1,000 cases, time ratio and error-share targets) is
``scripts/bench_chaos.py`` in ``make bench``; this test only fails on what must never
happen: a traceback or an exit code other than 0/1, a case missing from the final report,
a NaN, a malformed judge reply turned into a score.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.support.chaos_run import (
    ROOT,
    RagRun,
    eval_args,
    make_root,
    outcome,
    rag_env,
    run_rag,
    start_server,
)
from tests.support.chaos_server import CHAOS_SCORE

CASES = 200


def _checkpointed(cache: Path) -> tuple[str | None, int]:
    files = sorted((cache / "runs").glob("*.sqlite3"))
    if not files:
        return None, 0
    try:
        with sqlite3.connect(f"file:{files[0]}?mode=ro", uri=True, timeout=5) as db:
            (n,) = db.execute("SELECT COUNT(*) FROM cases").fetchone()
    except sqlite3.Error:
        return files[0].stem, 0
    return files[0].stem, int(n)


def test_chaos_run_killed_and_resumed_loses_nothing(tmp_path: Path) -> None:
    root, ids = make_root(tmp_path, CASES)
    cache = tmp_path / "cache"
    env = rag_env(root, cache)
    server = start_server(
        "--seed", "7", "--latency", "0.02", "--hang-s", "20", "--retry-after-s", "0.3"
    )
    try:
        args = eval_args(
            server.base_url,
            tmp_path / "out",
            "--judge-samples",
            "1",
            "--concurrency",
            "16",
            "--timeout",
            "1",
        )
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        run_id, done = None, 0
        while time.monotonic() - started < 120 and proc.poll() is None:
            run_id, done = _checkpointed(cache)
            if done >= CASES // 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.kill()  # SIGKILL: no clean-up of any kind
        out, err = proc.communicate(timeout=30)
        killed = RagRun(proc.returncode, out, err, time.monotonic() - started)
        assert run_id is not None and done >= CASES // 3
        resumed = run_rag(["eval", "run", "--resume", run_id, "--quiet"], env, timeout=300)
        stats = server.stats()
    finally:
        server.stop()

    got = outcome([killed, resumed], ids, good_score=CHAOS_SCORE)
    assert got.crashes == 0, got.details
    assert got.lost == 0, got.details
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]
    assert got.scored_malformed == 0, got.details
    assert got.judge_samples > CASES  # the judge did score (else the check proves nothing)
    faults = stats["faults"]
    for kind in ("rate_limited", "server_error", "hang", "bad_body"):
        assert faults.get(kind, 0) > 0, faults  # every fault kind was injected
    report = resumed.report
    assert report is not None
    assert report["totals"]["cases_done"] == CASES and not report["partial"]
    assert len(list((cache / "runs").glob("*.sqlite3"))) == 1
    leftovers = [p for p in (tmp_path / "out").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
