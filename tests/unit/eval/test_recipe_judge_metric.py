"""The add-a-judge-metric recipe, carried out as the page writes it.

On a copy of the repository, the code blocks of ``docs/extending/add-a-judge-metric.md`` are
written to the files they name (the prompt module created, the entry appended to the built-in
judges) and the page's ``rag`` commands run in order: lock, check, an offline smoke run. The new
metric must be in the report, scored by its own offline rule; the copy's own inventory tests —
unchanged — must pass with the new judge among the shipped ones; and the change must be three
files: the prompt module, the entry's module and the lock line ``rag prompts lock`` wrote.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo_copy import (
    ROOT,
    clean_env,
    copy_repo,
    rag_shim,
    repo_files,
    share_embeddings,
)

PAGE = ROOT / "docs" / "extending" / "add-a-judge-metric.md"
CODE = re.compile(r'```python title="([^"]+)"\n(.*?)```', re.S)
SHELL = re.compile(r"```bash\n(.*?)```", re.S)
# the copy's own tests that list what is shipped (prompts, prompt ids, judges, metrics)
INVENTORY_TESTS = (
    "tests/unit/test_prompt_fixtures.py",
    "tests/unit/registry/test_registry_rules.py::test_shipped_library_is_clean",
    "tests/unit/registry/test_registry_cli.py::test_list_json",
    "tests/unit/eval/test_judge_table.py::test_the_table_is_the_one_list_of_judge_metrics",
    "tests/unit/eval/test_judge_table.py::test_calibration_labels_are_checked_against_the_table",
    "tests/unit/eval/test_registry_cache.py",
    "tests/unit/llm/test_llm_offline.py::test_unknown_judge_metric",
    "tests/unit/structure",
)


def _expected_score(answer: str) -> float:
    """The conciseness rule as the page states it: 80/160/240/400 characters."""
    n = len(answer.strip())
    return 5.0 if n <= 80 else 4.0 if n <= 160 else 3.0 if n <= 240 else 2.0 if n <= 400 else 1.0


@pytest.mark.slow
def test_a_judge_metric_is_a_prompt_module_one_entry_and_the_lock_line(tmp_path: Path) -> None:
    page = PAGE.read_text(encoding="utf-8")
    blocks = CODE.findall(page)
    assert [path for path, _ in blocks] == [
        "app/generation/prompts/judge/conciseness_v1.py",
        "app/eval/scoring/judged.py",
    ]
    copy = copy_repo(tmp_path / "repo")
    share_embeddings(copy)
    bin_dir = tmp_path / "bin"
    rag_shim(copy, bin_dir)
    env = clean_env(copy, bin_dir)
    before = repo_files(copy)

    for rel, code in blocks:  # a file the page names is created, or the block appended to it
        target = copy / rel
        text = target.read_text(encoding="utf-8") + "\n\n" if target.exists() else ""
        target.write_text(text + code, encoding="utf-8")

    out = tmp_path / "out"
    commands = [
        line.strip()
        for block in SHELL.findall(page)
        for line in block.splitlines()
        if line.strip().startswith("rag ")
    ]
    assert [c.split()[:3] for c in commands] == [
        ["rag", "prompts", "lock"],
        ["rag", "prompts", "check"],
        ["rag", "eval", "run"],
    ]
    for command in commands:
        argv = [a.replace("/tmp/conciseness", str(out)) for a in shlex.split(command)]
        done = subprocess.run(
            argv, cwd=copy, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        if argv[1:3] == ["prompts", "lock"]:
            assert "judge/conciseness_v1" in done.stdout

    (report_path,) = out.glob("eval_*.json")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["metrics"]["conciseness"]["kind"] == "judge"
    assert report["meta"]["judge"]["prompts"]["judge/conciseness"]["version"] == (
        "judge/conciseness_v1"
    )
    assert len(report["cases"]) == len(
        (copy / "tests/eval/datasets/smoke_v1.0.jsonl").read_text(encoding="utf-8").splitlines()
    )
    for case in report["cases"]:
        score = case["metrics"]["conciseness"]
        if case["answer"] is None:  # the pipeline failed: no judge was asked
            continue
        # the rule's definition, applied to the answer the report shows
        assert score["value"] == _expected_score(case["answer"]), case["id"]
        assert set(score["samples"]) == {score["value"]}, case["id"]

    # the copy's inventory tests, unchanged, hold with the new judge among the shipped ones
    tests_env = {**env, "PYTHONPATH": str(copy)}
    tests_env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *INVENTORY_TESTS],
        cwd=copy,
        env=tests_env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

    after = repo_files(copy)
    changed = sorted(
        rel for rel in {*before, *after} if before.get(rel) != after.get(rel) and rel in after
    )
    removed = sorted(set(before) - set(after))
    assert removed == [] and changed == [
        "app/eval/scoring/judged.py",
        "app/generation/prompts/judge/conciseness_v1.py",
        "app/generation/prompts/prompts.lock",
    ], changed
