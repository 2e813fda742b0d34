"""The add-a-provider recipe, carried out as the page writes it.

On a copy of the repository, the code blocks of ``docs/extending/add-a-provider.md`` that name
a file are written there (the provider module created; the family entry put where the page
says, above the table's closing marker) and the page's ``rag`` commands run in order against
an OpenAI-compatible server this test starts on 127.0.0.1: render, then an evaluation run.
The server must have received the family's calls (its model, its key variable's key, the body
``rag prompts render --json`` printed); the copy's structure test must pass; and the change
must be two files: the provider module and the table.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fake_llm_server import FakeLLMServer
from tests.support.repo_copy import (
    ROOT,
    clean_env,
    copy_repo,
    rag_shim,
    repo_files,
    share_embeddings,
)

PAGE = ROOT / "docs" / "extending" / "add-a-provider.md"
CODE = re.compile(r'```python title="([^"]+)"\n(.*?)```', re.S)
SHELL = re.compile(r"```bash\n(.*?)```", re.S)
MARKER = "# a new family: its entry above this line"
PAGE_URL = "http://127.0.0.1:8000/v1"  # the page's example endpoint, replaced by the server's
KEY = "mycloud-test-placeholder"  # not a key: what the server must see as the bearer token


def _answer(body: object) -> str:
    return "年假为 5 天 [1]。"


@pytest.mark.slow
def test_an_openai_like_family_is_one_module_and_one_table_entry(tmp_path: Path) -> None:
    page = PAGE.read_text(encoding="utf-8")
    blocks = CODE.findall(page)
    assert [path for path, _ in blocks] == [
        "app/llm/providers/mycloud.py",
        "app/llm/providers/families.py",
    ]
    copy = copy_repo(tmp_path / "repo")
    share_embeddings(copy)
    bin_dir = tmp_path / "bin"
    rag_shim(copy, bin_dir)
    env = {**clean_env(copy, bin_dir), "MYCLOUD_API_KEY": KEY}
    before = repo_files(copy)

    module, entry = blocks
    assert not (copy / module[0]).exists()
    (copy / module[0]).write_text(module[1], encoding="utf-8")
    table = copy / entry[0]
    text = table.read_text(encoding="utf-8")
    (marker_line,) = [line for line in text.splitlines(keepends=True) if MARKER in line]
    table.write_text(text.replace(marker_line, entry[1] + marker_line), encoding="utf-8")

    commands = [
        line.strip()
        for block in SHELL.findall(page)
        for line in block.splitlines()
        if line.strip().startswith("rag ")
    ]
    assert [c.split()[:3] for c in commands] == [
        ["rag", "prompts", "render"],
        ["rag", "eval", "run"],
    ]
    out = tmp_path / "out"
    with FakeLLMServer(responder=_answer) as server:
        results = []
        for command in commands:
            argv = [
                a.replace(PAGE_URL, server.openai_base_url).replace("/tmp/mycloud", str(out))
                for a in shlex.split(command)
            ]
            done = subprocess.run(
                argv, cwd=copy, env=env, capture_output=True, text=True, timeout=600, check=False
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            results.append(done)
        received = list(server.received)

    rendered = json.loads(results[0].stdout)
    assert rendered["provider"] == "mycloud:qwen2-7b"
    assert rendered["request"]["model"] == "qwen2-7b"
    assert "max_tokens" in rendered["request"]  # not api.openai.com: the common parameter

    calls = [r for r in received if r.path == "/v1/chat/completions"]
    assert calls, "the run sent nothing to the family's endpoint"
    assert {r.body["model"] for r in calls} == {"qwen2-7b"}
    assert {r.headers.get("authorization") for r in calls} == {f"Bearer {KEY}"}
    assert all(set(r.body) >= {"model", "messages", "max_tokens"} for r in calls)

    (report_path,) = out.glob("eval_*.json")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["meta"]["config"]["model"].startswith("mycloud:qwen2-7b@http://127.0.0.1:")
    assert len(report["cases"]) == 3
    assert all(case["answer"] == _answer(None) for case in report["cases"])
    assert KEY not in report_path.read_text(encoding="utf-8")  # the key never reaches a report

    # the copy's structure test, unchanged, holds with the new module in the model layer
    tests_env = {**env, "PYTHONPATH": str(copy)}
    tests_env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/structure"],
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
    assert sorted(set(before) - set(after)) == []
    assert changed == ["app/llm/providers/families.py", "app/llm/providers/mycloud.py"], changed
