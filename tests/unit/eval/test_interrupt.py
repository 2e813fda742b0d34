"""Ctrl-C stops a CPU-bound run at once: with the offline providers no ``await`` of a case
ever suspends, so a cancelled run would only notice at its end (a 10,000-case run went on
for its whole minute). The interrupt must end the run within seconds, say how to resume,
exit 130 and leave no worker process behind — with one process and with workers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.paths import cache_dir

ROOT = Path(__file__).resolve().parents[3]
CASES = 6000  # 10-30 s of work: the interrupt comes right after the first committed cases


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    made = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/gen_bench_cases.py"),
            "--cases",
            str(CASES),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(made.stdout.strip())


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def _committed(run_id: str) -> int:
    path = cache_dir() / "runs" / f"{run_id}.sqlite3"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM cases").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not there yet
        return 0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_stops_an_offline_run_within_seconds(
    dataset: Path, tmp_path: Path, workers: str
) -> None:
    def default_sigint() -> None:  # a background test runner may have SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setpgrp()

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "eval",
            "run",
            "--dataset",
            str(dataset),
            "--quiet",
            "--workers",
            workers,
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        preexec_fn=default_sigint,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        run_id = proc.stderr.readline().split()[1]  # "run <id>", printed first
        # a loaded machine starts slowly: wait (bounded) for committed cases and the worker
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if _committed(run_id) and len(_children(proc.pid)) == int(workers) - 1:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        kids = _children(proc.pid)
        assert len(kids) == int(workers) - 1
        os.killpg(proc.pid, signal.SIGINT)
        started = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pipe in (proc.stdout, proc.stderr):  # closed whatever happened
            if pipe is not None:
                pipe.close()
        proc.wait()
    assert proc.returncode == 130, (out, err)
    # before the fix the run went on to its last case (a timeout here); a case is
    # milliseconds, so seconds are generous even on a loaded machine
    assert took < 15, f"the run went on for {took:.1f} s after Ctrl-C"
    assert _committed(run_id) < CASES
    assert "resume with rag eval run --resume" in err
    assert "Traceback" not in err
    time.sleep(0.5)
    assert not [k for k in kids if Path(f"/proc/{k}").exists()], "a worker outlived the run"
