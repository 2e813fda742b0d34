"""``rag eval run --batch`` end to end: the real command against a local fake batch server
(OpenAI Batch shapes through the SDK), multi-stage cases (rewrite → answer → judges), the
cache afterwards, and a kill -9 while a batch runs followed by ``--resume``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.fake_batch_server import FakeBatchServer

REPO = Path(__file__).resolve().parents[2]


def _args(url: str, out: Path) -> list[str]:
    v1 = f"{url}/v1"
    return [
        "eval", "run", "--suite", "hard", "--limit", "3", "--quiet",
        "--model", f"openai:gpt-4o-mini@{v1}", "--judge", f"openai:gpt-4o@{v1}",
        "--batch", "--batch-poll", "0.01", "--batch-flush", "0.2", "--out", str(out),
    ]  # fmt: skip


def _calls(report: dict[str, Any]) -> int:
    cases = report["cases"]
    llm = sum(c["trace"]["tokens"]["llm_calls"] for c in cases)
    judge = 0
    for c in cases:
        for m in c["metrics"].values():
            if m.get("samples") is not None:
                judge += len(m["samples"]) + int((m.get("detail") or {}).get("repaired", 0))
    return llm + judge


def test_a_batched_run_pays_each_call_once_and_leaves_it_in_the_cache(
    scripted_llm: Any, rag: Any
) -> None:
    single = scripted_llm.server  # the single-call fake: nothing may reach it
    with FakeBatchServer(responder=scripted_llm) as batch:
        first = rag(*_args(batch.url, rag.out / "first"), timeout=180)
        assert first.returncode in (0, 1), first.stderr
        report = first.report()
        assert all(c["errors"] == [] for c in report["cases"]), [
            c["errors"] for c in report["cases"]
        ]
        assert batch.stats["requests"] == _calls(report)
        assert batch.stats["batches"] >= 3  # rewrite, answers, judges: one stage after another
        assert single.requests == 0

        second = rag(*_args(batch.url, rag.out / "second")[:-6], "--out", str(rag.out / "2"))
        assert second.returncode == first.returncode, second.stderr
        again = second.report()
        assert again["totals"]["engine"]["calls"] == 0  # everything from the cache
        assert batch.stats["requests"] == _calls(report) and single.requests == 0


def test_kill_while_a_batch_runs_then_resume_submits_nothing_twice(
    scripted_llm: Any, rag: Any, tmp_path: Path
) -> None:
    with FakeBatchServer(responder=scripted_llm, polls_to_end=10**9) as batch:
        err = (tmp_path / "stderr.txt").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", *_args(batch.url, rag.out)],
            cwd=REPO, env=rag.env, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while batch.stats["polls"] < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert batch.stats["batches"] >= 1, "no batch was submitted"
            submitted = batch.stats["batches"], batch.stats["requests"]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
            err.close()
        text = (tmp_path / "stderr.txt").read_text("utf-8")
        run_id = re.search(r"run (\S+)", text)
        assert run_id, text

        batch.polls_to_end = 0  # the provider finishes the batch while nobody watches
        resumed = rag("eval", "run", "--resume", run_id.group(1), "--quiet",
                      "--out", str(rag.out), timeout=180)  # fmt: skip
        assert resumed.returncode in (0, 1), resumed.stderr
        report = resumed.report()
        assert len(report["cases"]) == 3
        assert all(c["errors"] == [] for c in report["cases"])
        # the batch in flight at the kill was re-attached, not submitted again: every call
        # the report accounts for was sent to the provider exactly once
        assert batch.stats["requests"] == _calls(report)
        assert batch.stats["batches"] >= submitted[0]
