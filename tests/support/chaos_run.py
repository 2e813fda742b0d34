"""Run the real ``rag eval run`` against :mod:`tests.support.chaos_server` and judge it.

Shared by the chaos benchmark (``scripts/bench_chaos.py``, 1,000 cases) and its fast
variant in ``make test`` (``tests/e2e/test_e2e_chaos.py``, ~200 cases):

* :func:`make_root` builds a private repository root (``RAG_ROOT``) whose only suite,
  ``chaos``, has ``n`` cases: every shipped case in turn, renamed ``<id>.r<k>`` past the
  first round (the knowledge base is the shipped one, linked);
* :func:`start_server` starts the chaos server in its own process on 127.0.0.1 and
  :func:`run_rag` runs ``python -m app eval run`` in another (``--no-cache``: every call
  reaches the server), timed from outside;
* :func:`outcome` counts what the issue counts: crashes (an exit code other than 0/1, or a
  traceback), lost cases (planned but not in the report), errored cases, NaN, judge samples
  that are not the server's one well-formed score (a scored malformed reply), and — given
  the fault-free twin's report — cases whose metrics differ from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.suites import suite_cases

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("chaos_server.py")
SUITE = "chaos"
_SCRUB = ("RAG_", "LANGFUSE_", "OPENAI_", "ANTHROPIC_")
#: in a judge sample's error when its reply and the repair's were both malformed
#: (app.eval.scoring.judges.judge_sample)
_MALFORMED_TWICE = "; after repair: "


def shipped_cases() -> list[dict[str, Any]]:
    """This checkout's suites (not ``$RAG_ROOT``'s: the run gets a root of its own)."""
    return suite_cases(ROOT / "tests" / "eval" / "datasets")


def make_root(tmp: Path, n: int) -> tuple[Path, list[str]]:
    """A repository root with one suite of ``n`` cases; returns (root, case ids)."""
    base = shipped_cases()
    cases: list[dict[str, Any]] = []
    for i in range(n):
        case = dict(base[i % len(base)])
        if i >= len(base):
            case["id"] = f"{case['id']}.r{i // len(base)}"
        cases.append(case)
    root = tmp / "root"
    datasets = root / "tests" / "eval" / "datasets"
    datasets.mkdir(parents=True)
    (datasets / f"{SUITE}_v1.0.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8"
    )
    (root / "tests" / "eval" / "kb").symlink_to(ROOT / "tests" / "eval" / "kb")
    (root / "reports").symlink_to(ROOT / "reports")  # the report schema
    return root, [c["id"] for c in cases]


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_stats", timeout=10) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the server exits when its stdin closes
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_server(*args: str) -> Server:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"chaos server did not start: {line!r}")
    return Server(proc, int(line.split()[1]))


@dataclass
class RagRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    report: dict[str, Any] | None = None
    report_path: Path | None = None


def rag_env(root: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env.update(
        RAG_ROOT=str(root),
        RAG_CACHE_DIR=str(cache),
        RAG_LOG_DIR=str(cache / "logs"),
        OPENAI_API_KEY="sk-chaos-bench-not-a-real-key-0000",
        PYTHONIOENCODING="utf-8",
        COLUMNS="160",
    )
    return env


def eval_args(base_url: str, out: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "run",
        "--suite",
        SUITE,
        "--model",
        f"openai:gpt-4o-mini@{base_url}",
        "--judge",
        f"openai:gpt-4o@{base_url}",
        "--no-cache",
        "--quiet",
        "--out",
        str(out),
        *extra,
    ]


def run_rag(args: list[str], env: dict[str, str], timeout: float = 1800) -> RagRun:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )
    run = RagRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
    for line in proc.stdout.splitlines():
        if line.startswith("report: ") and line.endswith(".json"):
            run.report_path = Path(line.split(" ", 1)[1])
            run.report = json.loads(
                run.report_path.read_text(encoding="utf-8"), parse_constant=_no_nan
            )
    return run


def _no_nan(token: str) -> Any:
    raise ValueError(f"report contains {token}")


@dataclass
class Outcome:
    crashes: int = 0
    lost: int = 0
    errored: int = 0
    errored_malformed_twice: int = 0  # of which: a judge reply and its repair both malformed
    cases: int = 0
    judge_samples: int = 0
    scored_malformed: int = 0  # judge samples whose score is not the server's one score
    differs: int = 0  # non-errored cases whose metrics differ from the fault-free run
    details: list[str] = field(default_factory=list)


def metric_values(case: dict[str, Any]) -> dict[str, Any]:
    skip = {"latency_s", "tokens", "cost_usd"}  # what a retry or a timeout may change
    return {k: m.get("value") for k, m in case["metrics"].items() if k not in skip}


def outcome(
    runs: list[RagRun],
    expected_ids: list[str],
    *,
    good_score: float,
    twin: dict[str, Any] | None = None,
) -> Outcome:
    """Judge the final run of ``runs`` (earlier ones: killed or resumed processes)."""
    out = Outcome()
    for run in runs:
        if run.returncode not in (0, 1, -9, 137) or "Traceback" in run.stderr + run.stdout:
            out.crashes += 1
            out.details.append(f"crash: exit {run.returncode}: {run.stderr[-600:]}")
    report = runs[-1].report
    if report is None:
        out.lost = len(expected_ids)
        out.details.append("no report written")
        return out
    cases = {c["id"]: c for c in report["cases"]}
    out.cases = len(cases)
    missing = [i for i in expected_ids if i not in cases]
    out.lost = len(missing) + (len(cases) - len(set(cases) & set(expected_ids)))
    if missing:
        out.details.append(f"lost: {missing[:5]}")
    twin_cases = {c["id"]: c for c in twin["cases"]} if twin else {}
    for cid, case in cases.items():
        if case["errors"]:
            out.errored += 1
            out.errored_malformed_twice += any(_MALFORMED_TWICE in e for e in case["errors"])
            out.details.append(f"{cid}: errored: {case['errors'][0][:300]}")
            continue
        for name, m in case["metrics"].items():
            for sample in m.get("samples") or []:
                out.judge_samples += 1
                if sample is not None and sample != good_score:
                    out.scored_malformed += 1
                    out.details.append(f"{cid}: {name} sample {sample}")
        if twin_cases.get(cid) is not None and metric_values(case) != metric_values(
            twin_cases[cid]
        ):
            out.differs += 1
            out.details.append(f"{cid}: metrics differ from the fault-free run")
    return out
