"""The approval check of a pull request (scripts/check_approvals.py) against a fake GitHub API
started on 127.0.0.1: a dataset change needs a business expert's approval, a judge prompt
change an evaluation owner's, the author never counts, the latest review decides, CODEOWNERS
comes from the base branch, and an API that cannot be read fails the check."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.integrations.approvals import main, owners_for, parse_codeowners

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "ghs_fake-token-for-the-test"
CODEOWNERS = (ROOT / ".github" / "CODEOWNERS").read_text(encoding="utf-8")
MEMBERS = {
    "rag-starter/business-experts": {"zhangsan", "lisi"},
    "rag-starter/eval-owners": {"wangwu"},
    "rag-starter/rag-team": {"dev1", "zhangsan"},
}


class FakeGitHub:
    """A pull request, its files and reviews; team memberships; CODEOWNERS at the base."""

    def __init__(self) -> None:
        self.author = "zhangsan"
        self.files: list[str] = []
        self.reviews: list[tuple[str, str]] = []
        self.codeowners = CODEOWNERS
        self.broken = False
        self.seen: list[str] = []


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _json(self, status: int, data: Any) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            fake.seen.append(url.path)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._json(401, {"message": "Bad credentials"})
                return
            if fake.broken:
                self._json(502, {"message": "bad gateway"})
                return
            page = int(dict(p.split("=") for p in url.query.split("&") if p).get("page", 1))
            path = url.path
            if path == "/repos/o/r/pulls/7":
                self._json(200, {"user": {"login": fake.author}, "base": {"ref": "main"}})
            elif path == "/repos/o/r/contents/.github/CODEOWNERS":
                assert "ref=main" in url.query  # the base branch's rule, not the PR's
                text = base64.b64encode(fake.codeowners.encode()).decode()
                self._json(200, {"content": text, "encoding": "base64"})
            elif path == "/repos/o/r/pulls/7/files":
                rows = [{"filename": f} for f in fake.files]
                self._json(200, rows[(page - 1) * 100 : page * 100])
            elif path == "/repos/o/r/pulls/7/reviews":
                rows = [{"user": {"login": u}, "state": s} for u, s in fake.reviews]
                self._json(200, rows[(page - 1) * 100 : page * 100])
            elif path.startswith("/orgs/"):
                _, _, org, _, team, _, login = path.split("/")
                if login in MEMBERS.get(f"{org}/{team}", set()):
                    self._json(200, {"state": "active", "role": "member"})
                else:
                    self._json(404, {"message": "Not Found"})
            else:
                self._json(404, {"message": "Not Found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def run(
    api: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    code = main(["--repo", "o/r", "--pr", "7", "--api", api])
    out = capsys.readouterr()
    text = out.out + out.err
    assert TOKEN not in text  # the token is never printed
    return code, text


DATASET = "tests/eval/datasets/smoke_v1.1.jsonl"
JUDGE = "app/generation/prompts/judge/faithfulness_v2.py"


def test_a_dataset_change_needs_a_business_experts_approval(
    github: tuple[FakeGitHub, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, api = github
    fake.files = [DATASET, "tests/eval/datasets/CHANGELOG.md"]
    code, out = run(api, monkeypatch, capsys)
    assert (
        code == 1
        and "missing: /tests/eval/datasets/" in out
        and "@rag-starter/business-experts" in out
    )
    fake.reviews = [("zhangsan", "APPROVED")]  # the author is an expert, but not their own reviewer
    assert run(api, monkeypatch, capsys)[0] == 1
    fake.reviews += [("dev1", "APPROVED")]  # a team member who is not an expert
    assert run(api, monkeypatch, capsys)[0] == 1
    fake.reviews += [("lisi", "APPROVED")]
    code, out = run(api, monkeypatch, capsys)
    assert code == 0 and "approved by lisi" in out and "approvals: ok" in out
    fake.reviews += [("lisi", "CHANGES_REQUESTED")]  # the latest review decides
    assert run(api, monkeypatch, capsys)[0] == 1
    fake.reviews += [("lisi", "COMMENTED"), ("lisi", "APPROVED")]
    assert run(api, monkeypatch, capsys)[0] == 0


def test_a_judge_prompt_change_needs_an_eval_owner_and_each_rule_its_own(
    github: tuple[FakeGitHub, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, api = github
    fake.author = "dev1"
    fake.files = [JUDGE, DATASET]
    fake.reviews = [("lisi", "APPROVED")]  # the dataset is approved, the ruler is not
    code, out = run(api, monkeypatch, capsys)
    assert code == 1
    assert "ok: /tests/eval/datasets/" in out and "missing: /app/generation/prompts/judge/" in out
    fake.reviews += [("wangwu", "APPROVED")]
    assert run(api, monkeypatch, capsys)[0] == 0


def test_unowned_changes_pass_and_many_files_are_paged(
    github: tuple[FakeGitHub, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, api = github
    fake.files = ["app/generation/prompts/system/kb_qa_v3.py", "README.md"]
    code, out = run(api, monkeypatch, capsys)
    assert code == 0 and "nothing to approve" in out
    fake.files = [f"docs/page{n}.md" for n in range(150)] + [DATASET]  # on the second page
    code, out = run(api, monkeypatch, capsys)
    assert code == 1 and "missing: /tests/eval/datasets/" in out


def test_an_api_that_cannot_be_read_fails_the_check(
    github: tuple[FakeGitHub, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, api = github
    fake.files = [DATASET]
    fake.broken = True
    code, out = run(api, monkeypatch, capsys)
    assert code == 1 and "not measured" in out and "502" in out
    monkeypatch.setenv("GITHUB_TOKEN", "")
    assert main(["--repo", "o/r", "--pr", "7", "--api", api]) == 2


def test_the_script_runs_from_the_base_checkout(github: tuple[FakeGitHub, str]) -> None:
    """What the workflow runs: the script with the stdlib only, the token from the env."""
    fake, api = github
    fake.files = [DATASET]
    fake.reviews = [("lisi", "APPROVED")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": api}
    proc = subprocess.run(
        [sys.executable, "-I", str(ROOT / "scripts" / "check_approvals.py"), "--pr", "7"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "approved by lisi" in proc.stdout


def test_codeowners_matching_is_gitignore_style() -> None:
    rules = parse_codeowners("* @a\n/docs/ @d\n*.toml @t\nbuild/ @b\n/app/x.py @x\n")
    assert owners_for("docs/a/b.md", rules).owners == ("@d",)  # type: ignore[union-attr]
    assert owners_for("app/eval/thresholds.toml", rules).owners == ("@t",)  # type: ignore[union-attr]
    assert owners_for("src/build/out.js", rules).owners == ("@b",)  # type: ignore[union-attr]
    assert owners_for("app/x.py", rules).owners == ("@x",)  # type: ignore[union-attr]
    assert owners_for("lib/app/x.py", rules).owners == ("@a",)  # type: ignore[union-attr]
    assert owners_for("mydocs/x.md", rules).owners == ("@a",)  # type: ignore[union-attr]


def test_the_workflow_runs_the_check_on_prs_and_reviews() -> None:
    import yaml

    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "approvals.yml").read_text("utf-8"))
    on = wf.get("on", wf.get(True))
    assert set(on) == {"pull_request", "pull_request_review"}
    job = wf["jobs"]["owners-approved"]
    assert job["steps"][0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert "scripts/check_approvals.py" in job["steps"][-1]["run"]
