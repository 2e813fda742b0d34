"""Shards as processes: 4 × ``rag eval run --shard i/4`` against a local provider, one of them
killed with SIGKILL mid-run and resumed, then ``rag eval merge`` — the merged report equals a
single process's case for case, and no provider call was answered twice."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class Killer:
    """Wraps the scripted provider: counts answered requests, SIGKILLs a process at the
    ``kill_after + 1``-th request (that request is never answered)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.answered = 0
        self.pid: int | None = None
        self.kill_after = 0
        self.killed = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, body: Any) -> str:
        with self.lock:
            if self.pid is not None and self.answered >= self.kill_after:
                os.kill(self.pid, signal.SIGKILL)
                self.pid = None
                self.killed.set()
                return "(the runner is dead: nobody reads this reply)"  # not counted
            self.answered += 1
        return str(self.inner(body))


def _calls(report: dict[str, Any]) -> int:
    judge = sum(
        len(m["samples"]) + int((m.get("detail") or {}).get("repaired", 0))
        for c in report["cases"]
        for m in c["metrics"].values()
        if m.get("samples") is not None
    )
    return sum(c["trace"]["tokens"]["llm_calls"] for c in report["cases"]) + judge


def _per_case(report: dict[str, Any]) -> dict[str, Any]:
    return {
        c["id"]: (
            c["answer"],
            {n: m["value"] for n, m in c["metrics"].items() if n not in ("latency_s", "cost_usd")},
        )
        for c in report["cases"]
    }


def test_four_shard_processes_one_killed_and_resumed_merge_to_one_run(
    scripted_llm: Any, rag: Any, tmp_path: Path
) -> None:
    server = scripted_llm.server
    killer = Killer(server.responder)
    server.responder = killer
    v1 = server.openai_base_url
    base = ["eval", "run", "--suite", "smoke", "--limit", "8", "--quiet",
            "--model", f"openai:gpt-4o-mini@{v1}", "--judge", f"openai:gpt-4o@{v1}"]  # fmt: skip
    shards = rag.out / "shards"

    # shard 2 alone, SIGKILLed by the provider at its 5th request. One request in flight
    # (--concurrency 1): with more, a reply already sent when the process dies is lost with
    # it and paid again on resume — no runner can keep what it never received.
    killer.kill_after = 4
    err = (tmp_path / "s2.err").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", *base, "--shard", "2/4", "--concurrency", "1",
         "--out", str(shards)],
        cwd=REPO, env=rag.env, stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    killer.pid = proc.pid
    try:
        assert proc.wait(timeout=120) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        err.close()
    assert killer.killed.is_set()
    run_id = re.search(r"run (\S+)", (tmp_path / "s2.err").read_text("utf-8"))
    assert run_id

    # the three others side by side, as processes
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "app", *base, "--shard", f"{i}/4", "--out", str(shards)],
            cwd=REPO,
            env=rag.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 3, 4)
    ]
    for p in procs:
        _out, errs = p.communicate(timeout=180)
        assert p.returncode in (0, 1), errs
    resumed = rag("eval", "run", "--resume", run_id.group(1), "--quiet", "--out", str(shards),
                  timeout=180)  # fmt: skip
    assert resumed.returncode in (0, 1), resumed.stderr
    reports = sorted(shards.glob("eval_*.json"))
    assert len(reports) == 4, reports

    merged = rag("eval", "merge", *map(str, reports), "--out", str(rag.out / "merged"))
    assert merged.returncode in (0, 1), merged.stderr
    assert "merged 4 shards, 8 cases" in merged.stdout
    report = merged.report()
    assert server.requests and killer.answered == _calls(report)  # nothing answered twice

    answered = killer.answered
    single = rag(*base, "--out", str(rag.out / "single"))
    assert single.returncode == merged.returncode, single.stderr
    assert killer.answered == answered  # the single run found every call in the cache
    assert _per_case(single.report()) == _per_case(report)
