"""The expert guide's workflow, run verbatim on a copy of the repository.

The commands are read from docs/datasets.md, between ``<!-- expert-workflow -->`` markers,
and run as one bash script with ``-e`` (so a failing ``rag datasets check`` stops it);
``rag`` runs the copy's own code. Done when: the check exits 0, and ``rag eval run --suite
smoke`` reports dataset version 1.1 with the added case.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.support.repo_copy import ROOT, clean_env, copy_repo, rag_shim, share_embeddings


def guide_workflow() -> str:
    text = (ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")
    match = re.search(
        r"<!-- expert-workflow -->\s*```bash\n(.*?)```\s*<!-- /expert-workflow -->", text, re.S
    )
    assert match, "docs/datasets.md lost its expert-workflow block"
    return match.group(1)


def test_guide_expert_workflow_verbatim(tmp_path: Path) -> None:
    script = guide_workflow()
    assert "rag datasets check\n" in script and "rag eval run --suite smoke" in script
    copy = copy_repo(tmp_path / "clone")
    share_embeddings(copy)  # the smoke run's KB vectors: computed once per test session
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    env = clean_env(copy, tmp_path / "bin")
    rag_shim(copy, tmp_path / "bin")
    before = (copy / "tests/eval/datasets/smoke_v1.0.jsonl").read_bytes()

    proc = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    # the check ran and was clean (with -e a failing check would have stopped the script)
    assert "0 error(s), 0 warning(s)" in proc.stdout, out[-3000:]
    reports = sorted((copy / "reports").glob("eval_*.json"))
    assert len(reports) == 1, out[-3000:]
    assert proc.returncode in (0, 1), out[-3000:]  # 1: the offline baseline misses thresholds
    report = json.loads(reports[0].read_text(encoding="utf-8"))
    [dataset] = report["meta"]["datasets"]
    assert (dataset["name"], dataset["version"], dataset["cases"]) == ("smoke", "1.1", 44)
    assert dataset["path"].endswith("smoke_v1.1.jsonl")
    ids = [c["id"] for c in report["cases"]]
    assert "smoke-044" in ids and len(ids) == 44
    assert "dataset smoke v1.1 · 44 cases" in proc.stdout
    # nothing released was touched; the CHANGELOG has the entry
    assert (copy / "tests/eval/datasets/smoke_v1.0.jsonl").read_bytes() == before
    log = (copy / "tests/eval/datasets/CHANGELOG.md").read_text(encoding="utf-8")
    assert "## smoke v1.1 — " in log and "Added smoke-044" in log
