"""`rag eval diff-prompt` pins what it resolved before its first run and takes every option of
`rag eval run` that sets a run.

Before: a 5.5-minute local-model run failed at the end with ``refusing to compare … dataset
smoke: base v1.0 vs new v1.2`` because a dataset version appeared between its two runs, and
it had no ``--dataset-version``, ``--limit``, ``--judge-samples`` or ``--allow-weak-judge``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from app.cli import cli as rag
from app.errors import ReportError

REPO = Path(__file__).resolve().parents[3]
CASES = ("smoke-035", "smoke-036", "smoke-037", "smoke-038")

# `rag eval run` options that do not set a run diff-prompt makes (each with the reason)
NOT_FOR_DIFF_PROMPT = {
    "--suite": "its own --suite (default smoke)",
    "--prompt": "the two versions are its arguments",
    "--out": "its --out-dir (its --out is the comparison's file)",
    "--resume": "two runs; a failed one is rerun (its answers come from the cache)",
    "--shard": "a comparison needs both whole runs",
    "--batch": "results within 24 h: not an interactive comparison",
    "--batch-poll": "with --batch",
    "--batch-flush": "with --batch",
    "--batch-timeout": "with --batch",
    "--quiet": "diff-prompt shows no progress bar",
    "--gate": "the comparison, not a gate, is its output (--fail-on-regression)",
    "--langfuse": "an upload of one run",
    "--help": "every command has its own",
}


def _command(*path: str) -> click.Command:
    command: click.Command = rag
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, path
        command = found
    return command


def _options(command: click.Command) -> dict[str, click.Parameter]:
    """The declared options. Not get_params(): its help option is built once per command and
    cached by click, with the help names of the first context that asked — `-h` after a test
    ran `rag eval run -h` through the root group, `--help` alone on a bare context."""
    return {opt: p for p in command.params for opt in p.opts}


def test_every_option_that_sets_a_run_is_diff_prompt_s_too() -> None:
    run, diff = _options(_command("eval", "run")), _options(_command("eval", "diff-prompt"))
    missing = sorted(set(run) - set(diff) - set(NOT_FOR_DIFF_PROMPT))
    assert not missing, f"rag eval diff-prompt lacks {missing}: add them or say why not"
    for flag in set(run) & set(diff) - set(NOT_FOR_DIFF_PROMPT):
        a, b = run[flag], diff[flag]
        assert (a.name, a.default, repr(a.type)) == (b.name, b.default, repr(b.type)), flag
        assert getattr(a, "help", None) == getattr(b, "help", None), flag  # one declaration


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests/eval/datasets").mkdir(parents=True)
    (root / "tests/eval/kb").mkdir(parents=True)
    (root / "reports").mkdir()
    lines = [
        line
        for line in (REPO / "tests/eval/datasets/smoke_v1.0.jsonl").read_text("utf-8").splitlines()
        if line.strip() and json.loads(line)["id"] in CASES
    ]
    (root / "tests/eval/datasets/smoke_v1.0.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    (root / "tests/eval/kb/sample").symlink_to(REPO / "tests/eval/kb/sample")
    (root / "reports/report.schema.json").symlink_to(REPO / "reports/report.schema.json")
    return root


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = _root(tmp_path)
    monkeypatch.setenv("RAG_ROOT", str(repo))
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))
    return repo


def test_a_dataset_version_released_between_the_runs_does_not_break_the_diff(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.eval.run.runner as runner

    original = runner.run_sync
    runs: list[Any] = []

    def run_then_release(config: Any, **kw: Any) -> Any:
        outcome = original(config, **kw)
        runs.append(config)
        if len(runs) == 1:  # v1.1 appears while diff-prompt is between its two runs
            datasets = root / "tests/eval/datasets"
            first = datasets / "smoke_v1.0.jsonl"
            cases = [json.loads(line) for line in first.read_text("utf-8").splitlines()]
            (datasets / "smoke_v1.1.jsonl").write_text(
                "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases[:3]), "utf-8"
            )
        return outcome

    monkeypatch.setattr(runner, "run_sync", run_then_release)
    out = tmp_path / "delta.json"
    result = CliRunner().invoke(
        rag,
        ["eval", "diff-prompt", "system/kb_qa", "v1", "v2", "--limit", "3", "--judge-samples",
         "1", "--metrics", "deterministic", "--out-dir", str(tmp_path / "r"), "--format", "json",
         "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "pinned smoke v1.0" in result.output
    assert [c.dataset_version for c in runs] == ["1.0", "1.0"]
    assert {c.kb_path for c in runs} == {str((root / "tests/eval/kb/sample").resolve())}
    assert [c.limit for c in runs] == [3, 3] and [c.judge_samples for c in runs] == [1, 1]
    reports = [json.loads(p.read_text("utf-8")) for p in sorted((tmp_path / "r").glob("*.json"))]
    assert [r["meta"]["datasets"][0]["version"] for r in reports] == ["1.0", "1.0"]
    assert [len(r["cases"]) for r in reports] == [3, 3]
    assert json.loads(out.read_text("utf-8"))["paired"] == 3


def test_a_dataset_changed_under_its_version_during_the_diff_is_named(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.eval.run.runner as runner

    original = runner.run_sync
    calls: list[int] = []

    def run_then_edit(config: Any, **kw: Any) -> Any:
        outcome = original(config, **kw)
        calls.append(1)
        if len(calls) == 1:
            path = root / "tests/eval/datasets/smoke_v1.0.jsonl"
            path.write_text(path.read_text("utf-8") + "\n", "utf-8")  # other bytes
        return outcome

    monkeypatch.setattr(runner, "run_sync", run_then_edit)
    result = CliRunner().invoke(
        rag,
        ["eval", "diff-prompt", "system/kb_qa", "v1", "v2", "--limit", "2", "--metrics",
         "deterministic", "--out-dir", str(tmp_path / "r")],
    )  # fmt: skip
    # a ReportError: `rag` prints its message and exits 2 (app/cli: RagError → exit 2)
    assert isinstance(result.exception, ReportError), result.output
    message = str(result.exception)
    assert "dataset smoke v1.0" in message and "changed between the two runs" in message
