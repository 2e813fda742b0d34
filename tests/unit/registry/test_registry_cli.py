"""``rag prompts …`` through the real entry point: output, files written, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from registry_helpers import edit

from app.generation.registry import build_registry, default_root
from app.generation.registry.authoring import new_version, prune

Rag = Callable[..., Any]


def test_list_json(rag: Rag) -> None:
    r = rag("prompts", "list", "--json")
    assert r.code == 0
    rows = {row["id"]: row for row in json.loads(r.out)}
    # one row per prompt id on disk (whatever their number)
    on_disk = {
        f"{p.parent.name}/{p.stem.rsplit('_v', 1)[0]}"
        for p in default_root().glob("*/*_v*.py")
        if p.is_file()
    }
    assert set(rows) == on_disk and on_disk
    assert rows["system/kb_qa"]["active"] == "v2"
    assert rows["system/kb_qa"]["fallback"] == "v1"
    assert rows["system/kb_qa"]["versions"] == ["v1", "v2"]
    assert "claude-opus-4-7" in rows["system/kb_qa"]["models"]
    assert rows["judge/faithfulness"]["purpose"].startswith("LLM-as-judge")


def test_list_text_marks(rag: Rag) -> None:
    r = rag("prompts", "list")
    line = next(x for x in r.out.splitlines() if x.startswith("system/kb_qa "))
    assert "v1f v2*" in line


def test_show(rag: Rag) -> None:
    r = rag("prompts", "show", "system/kb_qa_v1")
    assert r.code == 0
    assert r.out.startswith("# system/kb_qa_v1  sha256:")
    assert "--- USER_TEMPLATE ---\n参考资料：\n{context}" in r.out
    assert "差旅费报销标准里酒店上限是多少？" in r.out
    r = rag("prompts", "show", "system/kb_qa", "--json")
    data = json.loads(r.out)
    assert data["qualified"] == "system/kb_qa_v2"
    assert data["header"]["changes"][0]["version"] == "v2"
    assert len(data["test_fixtures"]) == 4


def test_render_text_and_json(rag: Rag, tmp_path: Path) -> None:
    hist = tmp_path / "h.json"
    hist.write_text(
        json.dumps([{"role": "user", "content": "早"}, {"role": "assistant", "content": "早上好"}]),
        encoding="utf-8",
    )
    r = rag(
        "prompts",
        "render",
        "system/kb_qa",
        "--model",
        "anthropic:claude-sonnet-4-6",
        "--var",
        "question=年假?",
        "--var",
        "context=[1] 5 天",
        "--history",
        str(hist),
    )
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].startswith("# system/kb_qa_v2  sha256:")
    assert "format=anthropic" in r.out.splitlines()[0]
    assert "--- system (cache_control: ephemeral) ---" in r.out
    assert (
        r.out.index("--- user ---\n早")
        < r.out.index("--- assistant ---\n早上好")
        < r.out.index("年假?")
    )

    vars_file = tmp_path / "v.json"
    vars_file.write_text(
        json.dumps({"question": "hi", "context": "c", "chat_history": ""}), encoding="utf-8"
    )
    r = rag(
        "prompts",
        "render",
        "system/retrieval_qa_en",
        "-m",
        "llama-2-7b-chat",
        "--vars-file",
        str(vars_file),
        "--json",
    )
    data = json.loads(r.out)
    assert data["chat_format"] == "llama2"
    assert data["prompt_text"].startswith("<s>[INST] <<SYS>>\nAlways answer")
    assert data["prompt_text"].endswith("Human: hi\nAssistant: [/INST]")
    # a bare id: the OpenAI Chat Completions body, the Llama-2 string as one user message
    assert (data["provider"], data["provider_inferred"]) == ("openai:llama-2-7b-chat", True)
    assert data["request"]["messages"] == [{"role": "user", "content": data["prompt_text"]}]

    r = rag(
        "prompts",
        "render",
        "system/kb_qa",
        "-m",
        "gpt-4o",
        "--format",
        "openai",
        "--var",
        "question=q",
        "--var",
        "context=c",
        "--json",
    )
    assert json.loads(r.out)["request"]["messages"][0]["role"] == "system"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["render", "system/kb_qa", "-m", "gpt-4o", "--var", "question=q"],
            "missing variable(s) ['context']",
        ),
        (
            [
                "render",
                "system/kb_strict",
                "-m",
                "gpt-4o",
                "--var",
                "question=q",
                "--var",
                "context=c",
            ],
            "APPLICABLE_MODELS",
        ),
        (["render", "system/kb_qa", "-m", "gpt-4o", "--var", "noequals"], "KEY=VALUE"),
        (["show", "system/nope"], "unknown prompt 'system/nope'"),
        (["rollback", "judge/relevance"], "nothing to roll back"),
    ],
)
def test_bad_input_exits_2_without_traceback(rag: Rag, args: list[str], needle: str) -> None:
    r = rag("prompts", *args)
    assert r.code == 2
    assert needle in r.err
    assert "Traceback" not in r.err


def test_new_version(lib: Path, rag: Rag) -> None:
    v2 = lib / "system" / "kb_qa_v2.py"
    before = v2.read_bytes()
    r = rag("prompts", "new", "system/kb_qa", "--root", str(lib), "--author", "测试员")
    assert r.code == 0, r.err
    assert "wrote system/kb_qa_v3.py" in r.out
    assert v2.read_bytes() == before  # the previous version is byte-identical
    v3 = (lib / "system" / "kb_qa_v3.py").read_text(encoding="utf-8")
    today = date.today().isoformat()
    assert 'VERSION = "kb_qa_v3"' in v3
    assert "版本: v3\n" in v3
    assert f"最近修改: 测试员 ({today})\n" in v3
    assert f"变更摘要:\n- v3 ({today}): TODO 描述本次变更\n- v2 (2026-05-10)" in v3
    # the TODO change summary is a violation (P029) until it says what changed
    r = rag("prompts", "check", "--root", str(lib))
    assert r.code == 1 and "P029" in r.out and "system/kb_qa_v3.py:" in r.out, r.out
    (lib / "system" / "kb_qa_v3.py").write_text(
        v3.replace("TODO 描述本次变更", "拒答更明确"), encoding="utf-8"
    )
    # the new draft passes the checks (it is not released, so nothing else changes)
    r = rag("prompts", "check", "--root", str(lib))
    assert r.code == 0, r.out
    spec = build_registry(lib).get("system/kb_qa_v3")
    assert [c.version for c in spec.header.changes] == [3, 2, 1]
    # and the active version is still v2
    assert build_registry(lib).get("system/kb_qa").version == 2


def test_new_on_english_header_without_modified_line(lib: Path) -> None:
    reg = build_registry(lib)
    path = new_version(reg, "summary/summarize_en", author="tester", today=date(2026, 7, 1))
    text = path.read_text(encoding="utf-8")
    assert "Version: v2\n" in text
    assert (
        "Modified: tester (2026-07-01)\nChanges:\n- v2 (2026-07-01): TODO describe the change\n"
        in text
    )
    mine = [v for v in build_registry(lib).check() if v.file == "summary/summarize_en_v2.py"]
    assert [(v.code, v.line) for v in mine] == [
        ("P029", text[: text.index("TODO")].count("\n") + 1)
    ]


def test_rollback_is_one_line(lib: Path, rag: Rag) -> None:
    releases = lib / "releases.toml"
    before = releases.read_text(encoding="utf-8").splitlines()
    r = rag("prompts", "rollback", "system/kb_qa", "--root", str(lib))
    assert r.code == 0, r.err
    assert "system/kb_qa: active v2 -> v1 (the fallback)" in r.out
    assert '-active = "v2"\n+active = "v1"' in r.out
    after = releases.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [('active = "v2"', 'active = "v1"')]
    assert (
        tomllib.loads(releases.read_text(encoding="utf-8"))["prompts"]["system/kb_qa"]["active"]
        == "v1"
    )
    assert build_registry(lib).get("system/kb_qa").version == 1
    assert rag("prompts", "check", "--root", str(lib)).code == 0


def test_lock_records_released_versions(lib: Path, rag: Rag) -> None:
    (lib / "prompts.lock").unlink()
    r = rag("prompts", "check", "--root", str(lib), "--json")
    assert r.code == 1
    assert {v["code"] for v in json.loads(r.out)["violations"]} == {"P017"}
    r = rag("prompts", "lock", "--root", str(lib))
    assert r.code == 0
    assert "19 released versions locked" in r.out
    lock = tomllib.loads((lib / "prompts.lock").read_text(encoding="utf-8"))["versions"]
    import hashlib

    expected = "sha256:" + hashlib.sha256((lib / "system/kb_qa_v1.py").read_bytes()).hexdigest()
    assert lock["system/kb_qa_v1"] == expected
    assert rag("prompts", "check", "--root", str(lib)).code == 0


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def fill_todo(path: Path) -> None:
    """Write the change summary `rag prompts new` leaves as a TODO."""
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("TODO 描述本次变更", "更清楚").replace("TODO describe the change", "clearer"),
        encoding="utf-8",
    )


@pytest.fixture
def repo(lib: Path) -> Path:
    _git(lib, "init", "-q")
    _git(lib, "add", "-A")
    _git(lib, "commit", "-qm", "base")
    return lib


def test_changed_since_released_edited_in_place(repo: Path, rag: Rag) -> None:
    edit(repo / "rewrite/multi_query_v1.py", "不要编号", "不要编号、不要引号")
    rag("prompts", "lock", "--root", str(repo))  # even re-locking does not hide the in-place edit
    r = rag("prompts", "check", "--root", str(repo), "--changed-since", "HEAD", "--json")
    assert r.code == 1
    codes = [(v["code"], v["file"]) for v in json.loads(r.out)["violations"]]
    assert codes == [("P023", "rewrite/multi_query_v1.py")]
    # a new version is not an in-place edit
    _git(repo, "checkout", "-q", "--", ".")
    path = new_version(build_registry(repo), "rewrite/multi_query", author="t")
    # its TODO change summary fails the check and the review until it is written
    r = rag("prompts", "check", "--root", str(repo), "--changed-since", "HEAD")
    assert r.code == 1 and "P029" in r.out, r.out
    r = rag("prompts", "review", "--root", str(repo), "--changed-since", "HEAD")
    assert "P029" in r.out, r.out
    fill_todo(path)
    r = rag("prompts", "check", "--root", str(repo), "--changed-since", "HEAD")
    assert r.code == 0, r.out


def test_changed_since_moving_the_ruler(repo: Path, rag: Rag) -> None:
    reg = build_registry(repo)
    fill_todo(new_version(reg, "judge/faithfulness", author="t"))
    fill_todo(new_version(reg, "system/kb_qa", author="t"))
    r = rag("prompts", "check", "--root", str(repo), "--changed-since", "HEAD", "--json")
    assert r.code == 1
    vs = json.loads(r.out)["violations"]
    assert [(v["code"], v["file"]) for v in vs] == [("P024", "judge/faithfulness_v2.py")]
    assert "system/kb_qa_v3.py" in vs[0]["message"]
    # the judge change alone is fine
    (repo / "system/kb_qa_v3.py").unlink()
    assert rag("prompts", "check", "--root", str(repo), "--changed-since", "HEAD").code == 0


def test_changed_since_bad_rev(repo: Path, rag: Rag) -> None:
    r = rag("prompts", "check", "--root", str(repo), "--changed-since", "no-such-rev")
    assert r.code == 2
    assert "no-such-rev" in r.err


def test_prune_rules(repo: Path, tmp_path: Path) -> None:
    reg = build_registry(repo)
    datasets = tmp_path / "ds"
    datasets.mkdir()
    # kb_qa_v1 is the fallback: it must stay whatever its age
    decisions = {d.qualified: d for d in prune(reg, today=date(2026, 12, 1), datasets=datasets)}
    assert set(decisions) == {"system/kb_qa_v1"}
    assert not decisions["system/kb_qa_v1"].deletable
    assert "releases.toml names it as fallback" in decisions["system/kb_qa_v1"].reasons

    # make v2 its own fallback: v1 is superseded since 2026-05-10
    edit(
        repo / "releases.toml",
        '[prompts."system/kb_qa"]\nactive = "v2"\nfallback = "v1"',
        '[prompts."system/kb_qa"]\nactive = "v2"\nfallback = "v2"',
    )
    reg = build_registry(repo)
    d = prune(reg, today=date(2026, 6, 1), datasets=datasets)[0]
    assert not d.deletable and "superseded 22 days ago" in d.reasons[0]
    d = prune(reg, today=date(2026, 7, 1), datasets=datasets)[0]
    assert d.deletable, d.reasons
    (datasets / "smoke_v1.0.jsonl").write_text(
        '{"id": "x", "prompt": "system/kb_qa_v1"}\n', encoding="utf-8"
    )
    d = prune(reg, today=date(2026, 7, 1), datasets=datasets)[0]
    assert not d.deletable and "dataset case" in d.reasons[0]


def test_prune_sees_a_rollback_in_history(repo: Path, tmp_path: Path) -> None:
    releases = repo / "releases.toml"
    edit(releases, 'active = "v2"\nfallback = "v1"', 'active = "v1"\nfallback = "v1"')
    _git(repo, "commit", "-qam", "roll back kb_qa")  # committed today, after v2's date
    edit(releases, 'active = "v1"\nfallback = "v1"', 'active = "v2"\nfallback = "v2"')
    reg = build_registry(repo)
    today = date.today() + timedelta(days=400)
    d = prune(reg, today=today, datasets=tmp_path)[0]
    assert not d.deletable
    assert any("rolled back to" in r for r in d.reasons)


def test_test_command_against_local_server(
    rag: Rag, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from tests.support.fake_llm_server import FakeLLMServer

    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-local")
    with FakeLLMServer() as server:  # default responder echoes the last user text
        model = f"openai:gpt-4o@{server.openai_base_url}"
        r = rag("prompts", "test", "system/kb_qa", "--model", model)
        assert r.code == 0, r.out + r.err
        assert "4/4 fixtures passed" in r.out
        server.script("我不知道", "600 元 [1]", "我不知道", "我不知道")
        r = rag("prompts", "test", "system/kb_qa", "--model", model)
    assert r.code == 1
    assert "system/kb_qa_v2 fixture 1: FAIL missing ['600', '[1]']" in r.out


def test_test_command_without_engine(rag: Rag, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "app.llm.engine", None)  # import fails
    r = rag("prompts", "test", "system/kb_qa", "--model", "anthropic:claude-opus-4-7")
    assert r.code == 2
    assert "no provider configured/available" in r.err


def test_review_is_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    import click

    import app.cli.prompts as prompts_cli

    ctx = click.Context(prompts_cli.cli)
    monkeypatch.setitem(prompts_cli._LAZY, "review", ("app.cli.no_such_module_xyz", "x"))
    assert prompts_cli.cli.get_command(ctx, "review") is None
    assert "review" not in prompts_cli.cli.list_commands(ctx)
    assert "check" in prompts_cli.cli.list_commands(ctx)


def test_console_script_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app", "prompts", "check"],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checked 19 prompt modules" in proc.stdout


def test_prune_without_git_history_keeps(lib: Path, tmp_path: Path) -> None:
    edit(lib / "releases.toml", 'active = "v2"\nfallback = "v1"', 'active = "v2"\nfallback = "v2"')
    d = prune(build_registry(lib), today=date(2026, 7, 1), datasets=tmp_path)[0]
    assert not d.deletable
    assert d.reasons == ("no git history of releases.toml: cannot show it was not rolled back to",)


def test_prune_cli_deletes_only_without_dry_run(
    repo: Path, rag: Rag, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_ROOT", str(tmp_path))  # no dataset case refers to anything
    edit(repo / "releases.toml", 'active = "v2"\nfallback = "v1"', 'active = "v2"\nfallback = "v2"')
    _git(repo, "commit", "-qam", "kb_qa fallback is v2")
    r = rag("prompts", "prune", "--dry-run", "--root", str(repo), "--today", "2026-07-01")
    assert r.code == 0
    assert r.out.splitlines() == ["deletable  system/kb_qa_v1"]
    assert (repo / "system/kb_qa_v1.py").exists()
    r = rag("prompts", "prune", "--root", str(repo), "--today", "2026-07-01")
    assert "deleted system/kb_qa_v1" in r.out
    assert not (repo / "system/kb_qa_v1.py").exists()
    rag("prompts", "lock", "--root", str(repo))
    assert rag("prompts", "check", "--root", str(repo)).code == 0
