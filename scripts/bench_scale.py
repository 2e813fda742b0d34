"""Benchmark: scale rows of issue 14, each a whole process, measured in this run.

Rows (targets from issue 14; ratio = measured ÷ target, ≤ 1 meets it):

* a 10,000-case offline run (``scripts/gen_bench_cases.py`` → ``.cache/bench``; run by
  ``scripts/run_dataset_file.py`` through the runner API): end to end, after the last case,
  peak RSS;
* ``rag eval compare`` of two 10,000-case reports (the run's report and a copy with a
  deterministic shift of some judge scores): time and peak RSS;
* ``rag report html`` of the 10,000-case report, and of a 10,000-case report made of an
  offline smoke run's cases repeated (``scripts/big_report.py``: no 10,000-case run needed);
* a warm rerun of smoke with every answer cached (whole process; provider calls = 0): the
  offline providers are not cacheable, so candidate and judge are the fake OpenAI server
  (``tests/support/chaos_server.py --no-faults``), whose request counter must not move;
* ``rag prompts check`` on 200 generated modules, as a process.

``--cases N`` runs fewer cases (targets are for 10,000; a smaller run prints no verdict
for the scale rows). ``--strict`` exits 1 on a miss. The load average is printed: the
machine is shared, and only ratios of rows measured in the same run compare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchrows import row as page_row  # noqa: E402  (scripts/, on sys.path when run as a script)

BIN = Path(sys.executable).parent
RAG = str(BIN / "rag") if (BIN / "rag").exists() else "rag"

TARGETS = {  # issue 14
    "run_total_s": 30.0,
    "run_after_last_s": 2.0,
    "run_peak_rss_mb": 300.0,
    "compare_s": 2.0,
    "compare_rss_mb": 200.0,
    "html_s": 3.0,
    "warm_smoke_s": 1.0,
    "prompts_check_s": 0.3,
}


_WRAP = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "rc = subprocess.call(sys.argv[1:])\n"
    "t = time.perf_counter() - t\n"
    "print(t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)\n"
)


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(seconds, peak RSS MB, stdout) of one child process (its RSS from a one-child
    wrapper's RUSAGE_CHILDREN, so other children of this script do not count)."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAP, *cmd], capture_output=True, env=env, cwd=ROOT, text=True
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    seconds, rss = proc.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(rss) / 1024, proc.stdout


def warm_rerun(tmp: Path, env: dict[str, str], limit: list[str]) -> tuple[float, int, int]:
    """(seconds of the second run, provider calls its report counts, requests that reached
    the server during it) of two identical smoke runs on one response cache (``limit``: the
    ``--limit`` arguments of a quick run, else none)."""
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "chaos_server.py"), "--no-faults"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().split()
        if not line or line[0] != "READY":
            raise SystemExit("the fake OpenAI server did not start")
        url = f"http://127.0.0.1:{line[1]}"
        # a placeholder key: the fake server checks none, and it is no one's secret
        wenv = {**env, "OPENAI_API_KEY": "bench-placeholder-not-a-key"}
        out = tmp / "warm"
        cmd = [RAG, "eval", "run", "--suite", "smoke", *limit, "--quiet", "--out", str(out)]
        cmd += ["--model", f"openai:gpt-4o-mini@{url}/v1", "--judge", f"openai:gpt-4o@{url}/v1"]
        timed(cmd, wenv)  # cold: fills the response cache
        before = _served(url)
        warm, _, _ = timed(cmd, wenv)
        served = _served(url) - before
        newest = max(out.glob("eval_*.json"), key=lambda p: p.stat().st_mtime)
        engine = json.loads(newest.read_text(encoding="utf-8"))["totals"]["engine"] or {}
        return warm, int(engine.get("calls", -1)), served
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


def _served(url: str) -> int:
    import urllib.request

    with urllib.request.urlopen(f"{url}/_stats", timeout=10) as r:
        return int(json.load(r)["requests"])


def shifted_copy(src: Path, dest: Path) -> None:
    """A second report of the same cases: every 7th case's judge scores one point lower,
    written in the layout every report of ``rag eval run`` / ``rag eval merge`` has (the
    summary on line 1, one case per line: :func:`app.eval.report.io.report_chunks`)."""
    from app.eval.report.io import report_chunks
    from app.eval.report.records import ReportSummary

    data = json.loads(src.read_text(encoding="utf-8"))
    judges = {k for k, v in data["metrics"].items() if v["kind"] == "judge"}
    for i, case in enumerate(data["cases"]):
        if i % 7 == 0:
            for name in judges & set(case["metrics"]):
                value = case["metrics"][name]["value"]
                if value is not None:
                    case["metrics"][name]["value"] = max(1.0, value - 1.0)
    data["run_id"] = data["run_id"][:-6] + "bbbbbb"
    cases = data.pop("cases")
    summary = ReportSummary.model_validate(data)
    rows = lambda: (json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases)  # noqa: E731
    with dest.open("wb") as fh:
        for chunk in report_chunks(summary, rows)():
            fh.write(chunk)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


_SECTION = [""]  # the row an indented row belongs to, for the benchmarks page


def row(name: str, value: float, unit: str, key: str | None, misses: list[str]) -> None:
    what = re.sub(r";? ?load [\d.]+", "", name.strip()).replace(" ()", "")
    if name.startswith(" "):
        what = f"{_SECTION[0]}: {what}"
    else:
        _SECTION[0] = what
    if key is None:
        print(f"  {name}: {value:.2f} {unit} (no target at this size; load {_load()})")
        page_row("scale", what, "— (a target needs the full size)", f"{value:.2f} {unit}", None)
        return
    target = TARGETS[key]
    ok = value <= target
    page_row("scale", what, f"≤ {target:g} {unit}", f"{value:.2f} {unit}", ok, value / target)
    print(
        f"  {name}: {value:.2f} {unit}; target ≤ {target:g}; ratio {value / target:.2f} "
        f"{'MET' if ok else 'MISS'} (load {_load()})"
    )
    if not ok:
        misses.append(name)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument(
        "--smoke-limit",
        type=int,
        default=None,
        help="run only the first N smoke cases in the warm-rerun and html rows (a quick run, "
        "as tests/unit/datasets/test_datasets_scripts.py does; no verdict on the warm row)",
    )
    args = ap.parse_args()
    limit = [] if args.smoke_limit is None else ["--limit", str(args.smoke_limit)]
    smoke = "smoke" if not limit else f"smoke (first {args.smoke_limit} cases)"
    full = args.cases >= 10_000
    print(f"load average at start: {_load()} on {os.cpu_count()} cores")
    misses: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        # bytecode as an installed package has it: the Makefile's PYTHONDONTWRITEBYTECODE
        # would make every child recompile app/ (0.1-0.2 s a process); a private prefix keeps
        # the .pyc files out of the tree
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(RAG_CACHE_DIR=str(t / "cache"), PYTHONPYCACHEPREFIX=str(t / "pycache"))
        # --- prompts check, 200 modules (a process; a first run writes the bytecode)
        from scripts.bench_registry import generate

        prompts = t / "prompts"
        generate(prompts)
        check = [RAG, "prompts", "check", "--root", str(prompts)]
        timed(check, env)
        best = min(timed(check, env)[0] for _ in range(3))
        row(
            f"rag prompts check, 200 modules, process (best of 3; load {os.getloadavg()[0]:.2f})",
            best,
            "s",
            "prompts_check_s",
            misses,
        )
        # --- warm smoke rerun, all cached: the offline providers bypass the cache
        # (cacheable = False), so the candidate and judge are the project's fake
        # OpenAI-compatible server (tests/support/chaos_server.py --no-faults, a cacheable
        # provider); its own request counter says how many calls reached it
        warm, calls, served = warm_rerun(t, env, limit)
        if calls or served:
            print(
                f"  warm rerun of {smoke}, process: {warm:.2f} s but {calls} provider calls "
                f"({served} requests reached the server): not all cached — MISS"
            )
            misses.append("warm all-cached rerun made provider calls")
        else:
            row(
                f"warm rerun of {smoke}, all cached (fake OpenAI server; 0 calls, 0 "
                "requests reached it), process",
                warm,
                "s",
                "warm_smoke_s" if not limit else None,
                misses,
            )
        # --- rag report html of an N-case report made of an offline smoke run's cases
        smoke_out = t / "smoke-offline"
        timed(
            [RAG, "eval", "run", "--suite", "smoke", *limit, "--quiet", "--out", str(smoke_out)],
            env,
        )
        from scripts.big_report import write_big_report

        big = write_big_report(next(smoke_out.glob("eval_*.json")), t / "repeated.json", args.cases)
        secs, _, _ = timed([RAG, "report", "html", str(big), "-o", str(t / "rep.html")], env)
        row(
            f"rag report html of a {args.cases}-case report ({smoke} cases repeated)",
            secs,
            "s",
            "html_s" if full else None,
            misses,
        )
        # --- the N-case run
        gen = subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "gen_bench_cases.py"),
                "--cases",
                str(args.cases),
                "--out",
                str(ROOT / ".cache" / "bench"),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        dataset = Path(gen.stdout.strip())
        _, rss, stdout = timed(
            [
                sys.executable,
                str(ROOT / "scripts" / "run_dataset_file.py"),
                str(dataset),
                str(t / "big"),
            ],
            env,
        )
        res = json.loads(stdout.strip().splitlines()[-1])
        n = res["cases"]
        # a run in several processes (app.eval.run.workers): the sum of every process's peak,
        # as the run itself reports them (never less than the largest one the OS saw)
        rss = max(rss, res["peak_rss_mb"])
        print(
            f"  {n}-case offline run ({res['calls']} offline provider calls, "
            f"{res['processes']} process(es) on {os.cpu_count()} cores):"
        )
        _SECTION[0] = f"{n:,}-case offline run, {res['processes']} process(es)"
        row("  end to end", res["total_s"], "s", "run_total_s" if full else None, misses)
        row(
            "  after the last case",
            res["after_last_s"],
            "s",
            "run_after_last_s" if full else None,
            misses,
        )
        row(
            "  peak RSS (every process's peak, summed)",
            rss,
            "MB",
            "run_peak_rss_mb" if full else None,
            misses,
        )
        # the same run in one process (--workers 1; not a target row: the default, auto,
        # shares a big offline run between the cores)
        _, rss1, stdout1 = timed(
            [
                sys.executable,
                str(ROOT / "scripts" / "run_dataset_file.py"),
                str(dataset),
                str(t / "big1"),
                "1",
            ],
            env,
        )
        res1 = json.loads(stdout1.strip().splitlines()[-1])
        print(
            f"  the same run with --workers 1 (information, not a target): end to end "
            f"{res1['total_s']:.2f} s, after the last case {res1['after_last_s']:.2f} s, "
            f"peak RSS {max(rss1, res1['peak_rss_mb']):.1f} MB (load {_load()})"
        )
        report = Path(res["report"])
        report = report if report.is_absolute() else ROOT / report
        other = t / "other.json"
        shifted_copy(report, other)
        secs, rss, _ = timed([RAG, "eval", "compare", str(report), str(other)], env)
        row(
            f"rag eval compare of two {n}-case reports",
            secs,
            "s",
            "compare_s" if full else None,
            misses,
        )
        row("  its peak RSS", rss, "MB", "compare_rss_mb" if full else None, misses)
        secs, _, _ = timed([RAG, "report", "html", str(report), "-o", str(t / "r.html")], env)
        row(f"rag report html of a {n}-case report", secs, "s", "html_s" if full else None, misses)
    print(f"load average at end: {_load()} (machine shared by other workers)")
    if misses:
        print(f"scale: {len(misses)} target(s) missed: {', '.join(misses)}")
    return 1 if (args.strict and misses) else 0


if __name__ == "__main__":
    sys.exit(main())
