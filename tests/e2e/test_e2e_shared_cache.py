"""Several ``rag eval run`` processes at once: one shared cache pays each call once, one shared
``--out`` keeps every report.

The expected request count is not ours: it is what the fake server counted for the same run
made alone (its own cache folder). Started together, the processes all miss the cache for
every call; without the cross-process claim (app/llm/claims.py) each of them paid for it.
"""

from __future__ import annotations

import collections
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _args(server: Any, out: Path, cases: int = 2, samples: int = 2) -> list[str]:
    v1 = server.openai_base_url
    return [
        "eval", "run", "--suite", "smoke", "--limit", str(cases),
        "--judge-samples", str(samples), "--quiet",
        "--model", f"openai:gpt-4o-mini@{v1}", "--judge", f"openai:gpt-4o@{v1}",
        "--out", str(out),
    ]  # fmt: skip


def _together(rag: Any, n: int, args: list[str], env: dict[str, str]) -> list[tuple[int, str]]:
    """Start ``n`` processes at once, wait for all (bounded); (exit code, stdout+stderr)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
        )
        for _ in range(n)
    ]
    done: list[tuple[int, str]] = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            done.append((proc.returncode, out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def _bodies(server: Any) -> collections.Counter[str]:
    return collections.Counter(json.dumps(r.body, sort_keys=True) for r in server.received)


def test_runs_started_together_share_one_cache_and_one_out_dir(
    scripted_llm: Any, rag: Any, tmp_path: Path
) -> None:
    server = scripted_llm.server
    server.latency_s = 0.15  # every call is in flight long enough for all runs to miss
    alone = rag(
        *_args(server, tmp_path / "alone"), extra_env={"RAG_CACHE_DIR": str(tmp_path / "c0")}
    )
    assert alone.returncode in (0, 1), alone.stderr
    expected = _bodies(server)
    assert sum(expected.values()) >= 2 * (1 + 3 * 2)  # answered and judged: a real run
    server.reset()

    n = 3
    runs = _together(rag, n, _args(server, rag.out), rag.env)
    assert all(code in (0, 1) for code, _ in runs), runs

    # one --out: no report lost, names unique per run id, nothing half-written left
    printed = [re.findall(r"report: (\S+\.json)", out) for _, out in runs]
    assert all(len(p) == 1 for p in printed), runs
    on_disk = sorted(rag.out.glob("*.json"))
    assert {Path(p[0]).resolve() for p in printed} == {p.resolve() for p in on_disk}
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in on_disk]
    assert len({r["run_id"] for r in reports}) == n
    for path, report in zip(on_disk, reports, strict=True):
        assert path.stem.endswith(report["run_id"][-6:])  # the name carries the run id
        assert path.with_suffix(".md").is_file()
    assert len(list(rag.out.glob("*.md"))) == n
    assert not [p for p in rag.out.rglob("*") if ".tmp" in p.name]

    # one cache: each call paid once, by whichever run claimed it first
    seen = _bodies(server)
    paid_twice = sum(seen.values()) - sum(expected.values())
    measured = (
        f"{n} runs on one cache: {sum(seen.values())} provider requests, one run alone "
        f"{sum(expected.values())}: {paid_twice} paid twice"
    )
    print(measured)  # pytest -s shows it
    assert paid_twice == 0, measured
    assert seen == expected  # each distinct request as often as one run alone sends it
    answers = [{c["id"]: c["answer"] for c in r["cases"]} for r in reports]
    assert all(a == answers[0] for a in answers) and len(answers[0]) == 2
    with sqlite3.connect(rag.cache / "llm" / "responses.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
