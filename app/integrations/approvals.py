"""The approval rule of a pull request, checked against the GitHub API (seed 004 §10.2, §11.3).

``.github/CODEOWNERS`` says who owns what: golden datasets belong to the business experts
(a dataset change needs one expert's approval), judge prompts and the scoring ruler to the
evaluation owners (a judge change needs an independent reviewer). GitHub enforces it only
with branch protection; this check says it in CI, for every pull request:

* every changed file whose owning CODEOWNERS line is not the catch-all ``*`` needs an
  approving review by one of that line's owners — a listed user, or an active member of a
  listed team — who is not the pull request's author;
* a reviewer's latest decisive review counts (``APPROVED`` after ``CHANGES_REQUESTED``
  approves; ``DISMISSED`` or a later ``CHANGES_REQUESTED`` withdraws it);
* ``CODEOWNERS`` is read from the *base* branch, so a pull request cannot rewrite its own
  rule.

Exit codes: 0 every owned change approved, 1 an approval is missing or the API could not
be read (a gate that could not measure fails), 2 bad usage. The token (``GITHUB_TOKEN`` or
``--token-env``) is sent only to ``GITHUB_API_URL`` and never printed; reading team
membership needs a token that may read the organisation's members.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Rule", "Verdict", "check_pull_request", "main", "owners_for", "parse_codeowners"]

Getter = Callable[[str], Any]  # API path -> parsed JSON (raises ApiError)


class ApiError(Exception):
    """A GitHub API call failed; the message names the path and the status, never the token."""

    def __init__(self, path: str, status: int | str, detail: str = "") -> None:
        super().__init__(f"GET {path}: {status}{' — ' + detail if detail else ''}")
        self.status = status


@dataclass(frozen=True)
class Rule:
    pattern: str
    owners: tuple[str, ...]
    line: int


def parse_codeowners(text: str) -> list[Rule]:
    rules = []
    for n, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        pattern, *owners = body.split()
        rules.append(Rule(pattern, tuple(owners), n))
    return rules


def _regex(pattern: str) -> re.Pattern[str]:
    """A CODEOWNERS (gitignore-style) pattern as a regex over repository paths: ``/`` at the
    start or inside anchors it at the root (else it matches at any depth), ``*`` stays inside
    one folder, ``**`` crosses folders, and a pattern that names a folder covers what is in it."""
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    body = pattern.strip("/")
    out = ""
    i = 0
    while i < len(body):
        if body.startswith("**", i):
            out += ".*"
            i += 2
        elif body[i] == "*":
            out += "[^/]*"
            i += 1
        elif body[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(body[i])
            i += 1
    return re.compile(("^" if anchored else "^(?:.*/)?") + out + "(?:/.*)?$")


def _matches(pattern: str, path: str) -> bool:
    return bool(_regex(pattern).match(path))


def owners_for(path: str, rules: Sequence[Rule]) -> Rule | None:
    """The rule that owns ``path``: the last matching line wins."""
    found = None
    for rule in rules:
        if _matches(rule.pattern, path):
            found = rule
    return found


@dataclass
class Verdict:
    ok: bool
    lines: list[str] = field(default_factory=list)


def _pages(get: Getter, path: str) -> list[Any]:
    out: list[Any] = []
    for page in range(1, 31):  # 3,000 files or reviews at most (the API's own file cap)
        sep = "&" if "?" in path else "?"
        batch = get(f"{path}{sep}per_page=100&page={page}")
        if not isinstance(batch, list):
            raise ApiError(path, "not a list")
        out.extend(batch)
        if len(batch) < 100:
            break
    return out


def _approvers(reviews: list[Any]) -> set[str]:
    latest: dict[str, str] = {}
    for review in reviews:  # the API lists them in the order they were submitted
        login = str((review.get("user") or {}).get("login") or "")
        state = str(review.get("state") or "")
        if login and state in {"APPROVED", "CHANGES_REQUESTED", "DISMISSED"}:
            latest[login] = state
    return {login for login, state in latest.items() if state == "APPROVED"}


def _owns(get: Getter, owner: str, login: str, cache: dict[tuple[str, str], bool]) -> bool:
    key = (owner, login)
    if key in cache:
        return cache[key]
    name = owner.lstrip("@")
    if "@" in name and "/" not in name:  # an email owner: GitHub maps it; we cannot
        result = False
    elif "/" in name:
        org, team = name.split("/", 1)
        try:
            data = get(f"/orgs/{org}/teams/{team}/memberships/{login}")
            result = isinstance(data, dict) and data.get("state") == "active"
        except ApiError as exc:
            if exc.status != 404:
                raise
            result = False
    else:
        result = name.lower() == login.lower()
    cache[key] = result
    return result


def check_pull_request(get: Getter, repo: str, number: int) -> Verdict:
    """The verdict for pull request ``number`` of ``repo`` (``owner/name``)."""
    pr = get(f"/repos/{repo}/pulls/{number}")
    author = str((pr.get("user") or {}).get("login") or "")
    base = str((pr.get("base") or {}).get("ref") or "")
    content = get(f"/repos/{repo}/contents/.github/CODEOWNERS?ref={base}")
    try:
        text = base64.b64decode(str(content.get("content", ""))).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise ApiError(".github/CODEOWNERS", "not UTF-8 text") from None
    rules = parse_codeowners(text)
    files = _pages(get, f"/repos/{repo}/pulls/{number}/files")
    paths = sorted(
        {str(f["filename"]) for f in files}
        | {str(f["previous_filename"]) for f in files if f.get("previous_filename")}
    )
    approvers = _approvers(_pages(get, f"/repos/{repo}/pulls/{number}/reviews")) - {author}
    needs: dict[Rule, list[str]] = {}
    for path in paths:
        rule = owners_for(path, rules)
        if rule is not None and rule.pattern not in {"*", "**"}:
            needs.setdefault(rule, []).append(path)
    verdict = Verdict(ok=True)
    cache: dict[tuple[str, str], bool] = {}
    if not needs:
        verdict.lines.append(f"PR #{number}: no owned file changed — nothing to approve")
    for rule, owned in sorted(needs.items(), key=lambda kv: kv[0].line):
        by = sorted(a for a in approvers if any(_owns(get, o, a, cache) for o in rule.owners))
        shown = ", ".join(owned[:5]) + (f" and {len(owned) - 5} more" if len(owned) > 5 else "")
        owners = " ".join(rule.owners)
        if by:
            verdict.lines.append(f"ok: {rule.pattern} ({shown}) approved by {', '.join(by)}")
        else:
            verdict.ok = False
            verdict.lines.append(
                f"missing: {rule.pattern} ({shown}) needs an approving review by {owners} "
                f"(CODEOWNERS line {rule.line}; the author {author} does not count)"
            )
    return verdict


def api_getter(base_url: str, token: str) -> Getter:
    def get(path: str) -> Any:
        req = urllib.request.Request(
            base_url.rstrip("/") + path,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "rag-starter-approvals",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise ApiError(path.split("?", 1)[0], exc.code) from None
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(path.split("?", 1)[0], type(exc).__name__, str(reason)[:200]) from None

    return get


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_approvals",
        description="Fail a pull request that changes owned files (datasets, judge prompts) "
        "without an approving review by an owner (.github/CODEOWNERS on the base branch).",
    )
    parser.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"), help="owner/name")
    parser.add_argument("--pr", type=int, required=True, help="pull request number")
    parser.add_argument("--api", default=os.environ.get("GITHUB_API_URL", "https://api.github.com"))
    parser.add_argument("--token-env", default="GITHUB_TOKEN", help="variable holding the token")
    args = parser.parse_args(argv)
    token = os.environ.get(args.token_env, "")
    if not args.repo or "/" not in args.repo:
        print("check_approvals: give --repo owner/name (or GITHUB_REPOSITORY)", file=sys.stderr)
        return 2
    if not token:
        print(f"check_approvals: ${args.token_env} is empty — pass a token", file=sys.stderr)
        return 2
    try:
        verdict = check_pull_request(api_getter(args.api, token), args.repo, args.pr)
    except ApiError as exc:
        print(
            f"check_approvals: could not read the pull request ({exc}); the approval rule was "
            "not measured, so it fails — a 403 on a team membership means the token may not "
            "read the organisation's members",
            file=sys.stderr,
        )
        return 1
    for line in verdict.lines:
        print(line)
    print("approvals: ok" if verdict.ok else "approvals: MISSING — the PR cannot merge yet")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
