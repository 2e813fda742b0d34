"""`rag prompts review`: the Appendix B checklist computed on a throwaway git repository."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli.prompts_review import cli
from app.generation.registry.review import isolated_placeholders, review_changes

PROMPTS = Path(__file__).resolve().parents[3] / "app" / "generation" / "prompts"


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    root = repo / "prompts"
    shutil.copytree(PROMPTS, root, ignore=shutil.ignore_patterns("__pycache__"))
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    return root


def make_v3(root: Path, *, user_template: str | None = None) -> Path:
    text = (root / "system" / "kb_qa_v2.py").read_text(encoding="utf-8")
    text = text.replace('VERSION = "kb_qa_v2"', 'VERSION = "kb_qa_v3"').replace(
        "版本: v2", "版本: v3"
    )
    text = text.replace("变更摘要:\n", "变更摘要:\n- v3 (2026-11-30): 测试用新版本\n")
    text = text.replace(
        "- v1 (2026-04-01): 初版\n",
        "- v1 (2026-04-01): 初版\n评测基线:\n- smoke set: faithfulness=4.35 (2026-11-30)\n",
    )
    if user_template is not None:
        start = text.index('USER_TEMPLATE = """')
        end = text.index('"""', start + len('USER_TEMPLATE = """')) + 3
        text = text[:start] + f'USER_TEMPLATE = """{user_template}"""' + text[end:]
    path = root / "system" / "kb_qa_v3.py"
    path.write_text(text, encoding="utf-8")
    return path


def items(review, qualified: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    p = next(p for p in review.prompts if p.qualified == qualified)
    return {i.name: i.status for i in p.items}


def test_placeholders_outside_xml_tags_are_found() -> None:
    inside, outside = isolated_placeholders("<资料>\n{context}\n</资料>\n问题：{question}")
    assert inside == ["context"] and outside == ["question"]
    assert isolated_placeholders("{{literal}} <q>{question}</q>") == (["question"], [])


def test_new_version_with_a_clean_delta_passes_the_checklist(root: Path, tmp_path: Path) -> None:
    make_v3(root)
    delta = tmp_path / "delta.md"
    delta.write_text(
        "### Delta table: a (system/kb_qa_v2) → b (system/kb_qa_v3)\n\n"
        "| metric | base | new | Δ | verdict |\n|---|---|---|---|---|\n"
        "| faithfulness | 4.00 ± 0.50 | 4.20 ± 0.40 | +0.20 | ✅ better (p=0.01) |\n",
        encoding="utf-8",
    )
    review = review_changes("main", root=root, deltas=[delta])
    assert [p.qualified for p in review.prompts] == ["system/kb_qa_v3"]
    got = items(review, "system/kb_qa_v3")
    assert got == {
        "versioned file name": "pass",
        "complete header": "pass",
        "declared models": "pass",
        "fixtures passing": "pass",
        "delta table attached": "pass",
        "refusal / citation / anti-hallucination": "pass",
        "user input isolated in XML tags": "pass",
        "no released version edited in place": "pass",
        "no regression": "pass",
    }
    assert review.passed

    # the same change with a ❌ row in its delta table fails "no regression"
    delta.write_text(
        delta.read_text(encoding="utf-8").replace("✅ better", "❌ significant regression"),
        encoding="utf-8",
    )
    assert (
        items(review_changes("main", root=root, deltas=[delta]), "system/kb_qa_v3")["no regression"]
        == "fail"
    )


def test_missing_delta_unisolated_input_and_in_place_edit_fail(root: Path) -> None:
    make_v3(
        root, user_template="参考资料：{context}\n问题：{question}\n根据现有资料无法确定时请说明。"
    )
    v1 = root / "system" / "kb_qa_v1.py"
    v1.write_text(v1.read_text(encoding="utf-8") + "\n# edited in place\n", encoding="utf-8")
    review = review_changes("main", root=root)
    v3 = items(review, "system/kb_qa_v3")
    assert v3["delta table attached"] == "fail" and v3["no regression"] == "fail"
    assert v3["user input isolated in XML tags"] == "fail"
    old = items(review, "system/kb_qa_v1")
    assert old["no released version edited in place"] == "fail"
    assert not review.passed

    res = CliRunner().invoke(cli, ["--changed-since", "main", "--root", str(root)])
    assert res.exit_code == 1
    assert "outside any <tag>…</tag>: {context}, {question}" in res.output


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_a_delta_no_model_measured_is_unverified_never_ready(
    root: Path, tmp_path: Path, fmt: str
) -> None:
    from app.eval.compare import compare_reports, comparison_markdown
    from tests.unit.compare.conftest import build_report

    make_v3(root)
    values = {"faithfulness": [4.0] * 10, "citation_accuracy": [1.0] * 10}
    kw = {"candidate": "offline:extractive", "judge": "offline:reference-judge"}
    cmp = compare_reports(
        build_report(values, prompt_version="system/kb_qa_v2", **kw),
        build_report(values, prompt_version="system/kb_qa_v3", **kw),
    )
    delta = tmp_path / f"delta.{fmt}"
    delta.write_text(comparison_markdown(cmp) if fmt == "md" else cmp.to_json(), encoding="utf-8")
    review = review_changes("main", root=root, deltas=[delta])
    got = items(review, "system/kb_qa_v3")
    assert got["delta table attached"] == "unverified" and got["no regression"] == "unverified"
    assert not review.passed
    md = review.to_markdown()
    assert "— ⚠️ unverified: no model ran" in md and "ready for review" not in md
    res = CliRunner().invoke(cli, ["--changed-since", "main", "--root", str(root), "--delta", str(delta)])  # fmt: skip
    assert res.exit_code == 1 and "unverified: no model ran" in res.output
