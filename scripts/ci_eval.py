#!/usr/bin/env python3
"""The glue the GitHub workflows call (kept here, in Python, so that it is tested).

``prompt-delta``  (ci.yml, pull requests) — finds the prompt modules a PR changed, runs
    ``rag eval diff-prompt`` for each against the version that is *active on the target
    branch* (its ``releases.toml``), appends ``rag prompts review`` and writes one markdown
    body that starts with :data:`MARKER` (the PR comment is found by it and updated in
    place) and goes to ``$GITHUB_STEP_SUMMARY``. Without provider secrets it runs the
    offline baselines and says, at the top, that live scores were skipped; its headline is
    then "⚠️ unverified: no model ran" (never "ready"), as it is whenever a table says so. With
    ``--pages DIR`` it also writes each prompt's static viewer pages (``rag report html`` of
    the new version's run, ``rag eval compare --format html`` of the two runs) into
    ``DIR/<prompt>/`` and lists them under :data:`PAGES_MARKER`, which the workflow replaces
    with the link to the uploaded artifact.
``nightly-summary`` (eval-nightly.yml) — the report's bad cases (its one policy, each
    reason with its severity) and the comparison with the last nightly baseline, as
    markdown; exit 1 on a regression.

Usage::

    python scripts/ci_eval.py prompt-delta --base-ref origin/main --out delta.md [--live] [--pages DIR]
    python scripts/ci_eval.py nightly-summary REPORT.json [--baseline FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.eval.report.records import Report

MARKER = "<!-- rag-starter:prompt-delta -->"
PAGES_MARKER = "<!-- rag-starter:viewer-pages -->"
_REPORT_LINE = re.compile(r"^diff-prompt: (?P<version>\S+) → (?P<path>.+\.json)$", re.MULTILINE)
PROMPTS_DIR = "app/generation/prompts"
_MODULE_RE = re.compile(
    rf"^{PROMPTS_DIR}/(?P<category>[a-z0-9_]+)/(?P<slug>[a-z0-9_]+)_v(?P<version>[1-9][0-9]*)\.py$"
)
LIVE_MODEL = "anthropic:claude-sonnet-4-6"
LIVE_JUDGE = "anthropic:claude-opus-4-7"
UNVERIFIED = "unverified: no model ran"  # app.eval.compare.UNVERIFIED (scripts stay light)
HEADLINE = "## Prompt changes: delta tables"
SKIPPED_LIVE = (
    "> **Live scores were skipped**: no provider secret (`ANTHROPIC_API_KEY`) is available "
    "to this run (e.g. a pull request from a fork). The tables below come from the offline "
    "baselines (`offline:extractive` answering, `offline:reference-judge` judging): they "
    "show that the prompt loads, renders and runs end to end, not whether it is better."
)

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class ChangedPrompt:
    prompt_id: str  # "system/kb_qa"
    new_version: int  # the highest version this PR touched
    base_version: int | None  # active on the target branch; None: a new prompt
    files: tuple[str, ...]

    @property
    def edited_in_place(self) -> bool:
        return self.base_version is not None and self.new_version <= self.base_version


def _git(args: Sequence[str], cwd: Path) -> str:
    res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {res.stderr.strip()}")
    return res.stdout


def active_versions_at(ref: str, cwd: Path) -> dict[str, int]:
    """``{prompt_id: active version}`` from ``releases.toml`` as it is at ``ref``."""
    res = subprocess.run(
        ["git", "show", f"{ref}:{PROMPTS_DIR}/releases.toml"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        return {}  # the target branch has no registry yet: every prompt is new
    out: dict[str, int] = {}
    for pid, table in tomllib.loads(res.stdout).get("prompts", {}).items():
        m = re.fullmatch(r"v([1-9][0-9]*)", str(table.get("active", "")))
        if m:
            out[pid] = int(m.group(1))
    return out


def changed_prompts(base_ref: str, cwd: Path) -> list[ChangedPrompt]:
    """Prompt modules added, modified or renamed between the merge base and HEAD."""
    names = _git(
        ["diff", "--name-only", "--diff-filter=AMR", f"{base_ref}...HEAD", "--", PROMPTS_DIR],
        cwd,
    ).split()
    touched: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        m = _MODULE_RE.match(name)
        if m:
            pid = f"{m['category']}/{m['slug']}"
            touched.setdefault(pid, []).append((int(m["version"]), name))
    active = active_versions_at(base_ref, cwd)
    return [
        ChangedPrompt(
            prompt_id=pid,
            new_version=max(v for v, _ in files),
            base_version=active.get(pid),
            files=tuple(sorted(f for _, f in files)),
        )
        for pid, files in sorted(touched.items())
    ]


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def prompt_delta(
    base_ref: str,
    *,
    cwd: Path,
    rag: str = "rag",
    suite: str = "smoke",
    live: bool = False,
    run: Runner = _run,
    pages: Path | None = None,
) -> tuple[str, int]:
    """The PR comment body and an exit code (1 when a table shows a regression).

    ``pages``: write each prompt's viewer pages under ``pages/<prompt>/`` (see the module)."""
    prompts = changed_prompts(base_ref, cwd)
    parts = [MARKER, HEADLINE, ""]
    if live:
        parts += [f"Live models: candidate `{LIVE_MODEL}`, judge `{LIVE_JUDGE}`.", ""]
    else:
        parts += [SKIPPED_LIVE, ""]
    if not prompts:
        parts.append("No prompt module changed in this pull request.")
        return "\n".join(parts) + "\n", 0
    rc = 0
    page_lines: list[str] = []
    delta_dir = cwd / "reports" / "pr-delta"
    delta_dir.mkdir(parents=True, exist_ok=True)
    for p in prompts:
        parts.append(f"### `{p.prompt_id}` v{p.base_version or '—'} → v{p.new_version}")
        parts.append("")
        if p.base_version is None:
            parts += ["New prompt: no active version on the target branch to compare with.", ""]
            continue
        if p.edited_in_place:
            parts += [
                f"❌ v{p.new_version} is at or below the active v{p.base_version} on the "
                "target branch: a released version was edited in place (seed 004 §4.1). "
                "Copy it to a new version instead.",
                "",
            ]
            rc = 1
            continue
        cmd = [rag, "eval", "diff-prompt", p.prompt_id, f"v{p.base_version}"]
        cmd += [f"v{p.new_version}", "--suite", suite, "--fail-on-regression"]
        slug = p.prompt_id.replace("/", "__")
        cmd += ["-o", str(delta_dir / (slug + ".md"))]
        if pages is not None:  # the two reports, kept apart per prompt for the pages
            cmd += ["--out-dir", str(delta_dir / slug)]
        if live:
            cmd += ["--model", LIVE_MODEL, "--judge", LIVE_JUDGE]
        res = run(cmd)
        if res.returncode not in (0, 1):
            parts += [f"`{' '.join(cmd)}` failed (exit {res.returncode}):", "", "```"]
            parts += [(res.stderr or res.stdout).strip()[-3000:], "```", ""]
            rc = 1
            continue
        rc = max(rc, res.returncode)
        parts += [res.stdout.strip(), ""]
        if pages is not None:
            listed, failed = viewer_pages(res.stderr, pages / slug, rag=rag, run=run)
            page_lines += [f"- `{p.prompt_id}`: " + listed]
            rc = max(rc, failed)
    if page_lines:
        parts += [
            "## Viewer pages",
            "",
            PAGES_MARKER,
            "Static pages of the runs above (open `run.html` or `compare.html` in a browser: "
            "cases with filter and search, every case's two answers side by side with a word "
            "diff):",
            "",
            *page_lines,
            "",
        ]
    if not live or any(UNVERIFIED in part for part in parts[3:]):
        parts[1] = f"{HEADLINE} — ⚠️ {UNVERIFIED}"
    review = run([rag, "prompts", "review", "--changed-since", base_ref, "--delta", str(delta_dir)])
    parts += ["## Review checklist (seed 004 Appendix B)", "", review.stdout.strip(), ""]
    if review.returncode not in (0, 1):
        parts += ["```", review.stderr.strip()[-2000:], "```", ""]
    return "\n".join(parts) + "\n", rc


def viewer_pages(stderr: str, out: Path, *, rag: str, run: Runner) -> tuple[str, int]:
    """``rag report html`` of the new version's run and ``rag eval compare --format html`` of
    the two, into ``out/run.html`` and ``out/compare.html`` (case pages beside them). The
    reports are the two paths ``diff-prompt`` names on stderr (base first). Returns the
    comment's line and 1 when a page could not be written (said in the line)."""
    paths = [m.group("path") for m in _REPORT_LINE.finditer(stderr)]
    if len(paths) != 2:
        return f"no pages: diff-prompt named {len(paths)} report(s), not 2", 1
    base, new = paths
    out.mkdir(parents=True, exist_ok=True)
    written, problems = [], []
    for name, cmd in (
        ("run.html", [rag, "report", "html", new, "-o", str(out / "run.html")]),
        (
            "compare.html",
            [
                rag,
                "eval",
                "compare",
                base,
                new,
                "--format",
                "html",
                "-o",
                str(out / "compare.html"),
            ],
        ),
    ):
        res = run(cmd)
        if res.returncode == 0:
            written.append(f"`{out.name}/{name}`")
        else:
            problems.append(f"{name} failed (exit {res.returncode}: {res.stderr.strip()[-300:]})")
    return ", ".join(written + problems), 1 if problems else 0


# ---------------------------------------------------------------- nightly


def _cell(text: str) -> str:
    """Text for a markdown table cell (a ``|`` would end the cell)."""
    return text.replace("|", "\\|").replace("\n", " ")


def bad_case_rows(report: Report) -> list[tuple[str, str, str]]:
    """``(case id, severity, reason)`` for every reason of the report's bad cases: the
    report's one policy (:func:`app.eval.report.io.bad_cases`), not a copy of it here."""
    return [
        (bad.id, "hard" if reason.hard else "quality", reason.message)
        for bad in report.bad_cases
        for reason in bad.reasons
    ]


def nightly_summary(report_path: Path, baseline: Path | None) -> tuple[str, int]:
    from app.errors import ReportError
    from app.eval.compare import comparison_markdown
    from app.eval.report.io import load_report

    report = load_report(report_path)
    rows = bad_case_rows(report)
    bar = report.meta.thresholds.bad_judge_score
    lines = [f"## Nightly evaluation: `{report_path.name}`", ""]
    lines += [
        f"**Bad cases**: {len(report.bad_cases)} (hard: red line, forbidden text, failed "
        f"injection, evaluation error; quality: judge score < {bar:g}, refusal error)",
        "",
    ]
    if rows:
        lines += ["| case | severity | reason |", "|---|---|---|"]
        lines += [f"| {cid} | {severity} | {_cell(reason)} |" for cid, severity, reason in rows]
        lines.append("")
    rc = 0
    if baseline is None or not baseline.exists():
        lines.append("No nightly baseline yet: this report becomes the first one.")
    else:
        try:
            note, cmp = _compare_with_baseline(baseline, report_path, report)
        except ReportError as exc:
            lines.append(f"Not compared with the baseline: {exc}")
        else:
            if note:
                lines += [note, ""]
            lines.append(comparison_markdown(cmp))
            rc = 1 if cmp.has_regression else 0
    return "\n".join(lines) + "\n", rc


def _compare_with_baseline(baseline: Path, report_path: Path, report: Any) -> tuple[str, Any]:
    """Compare with the baseline; after a dataset version bump (the only ruler that changed),
    compare on the cases both versions share unchanged, and say so in a note."""
    from app.eval.compare import compare_files, compare_reports, ruler_differences
    from app.eval.report.io import load_report

    base = load_report(baseline)
    diffs = ruler_differences(base, report)
    if not diffs or not all(d.startswith("dataset ") for d in diffs):
        return "", compare_files(baseline, report_path)  # same rulers, or refused by name
    old = {c.id: c for c in base.cases}
    new = {c.id: c for c in report.cases}
    same = [cid for cid in old if cid in new and old[cid].question == new[cid].question]
    edited = [cid for cid in old if cid in new and old[cid].question != new[cid].question]
    added = [cid for cid in new if cid not in old]
    removed = [cid for cid in old if cid not in new]
    keep = set(same)
    base_shared = base.model_copy(update={"cases": [c for c in base.cases if c.id in keep]})
    new_shared = report.model_copy(update={"cases": [c for c in report.cases if c.id in keep]})
    cmp = compare_reports(
        base_shared,
        new_shared,
        base_name=str(baseline),
        new_name=str(report_path),
        allow_ruler_change=True,
    )
    versions = "; ".join(diffs)
    note = (
        f"> **The dataset changed** ({versions}): compared on the {len(same)} cases both "
        f"versions share unchanged. Left out: {len(added)} new, {len(removed)} removed, "
        f"{len(edited)} edited (question changed)"
        + (f": {', '.join(edited[:8])}" if edited else "")
        + ". The next baseline is measured on the new version."
    )
    return note, cmp


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    pd = sub.add_parser("prompt-delta")
    pd.add_argument("--base-ref", required=True)
    pd.add_argument("--suite", default="smoke")
    pd.add_argument("--live", action="store_true", help="use the real provider models")
    pd.add_argument("--rag", default="rag", help="the rag executable")
    pd.add_argument("--out", type=Path, required=True)
    pd.add_argument("--pages", type=Path, default=None, help="write the viewer pages here")
    ns = sub.add_parser("nightly-summary")
    ns.add_argument("report", type=Path)
    ns.add_argument("--baseline", type=Path, default=None)
    ns.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "prompt-delta":
        body, rc = prompt_delta(
            args.base_ref,
            cwd=Path.cwd(),
            rag=args.rag,
            suite=args.suite,
            live=args.live,
            pages=args.pages,
        )
        args.out.write_text(body, encoding="utf-8")
    else:
        from app.errors import UserError

        try:
            body, rc = nightly_summary(args.report, args.baseline)
        except UserError as exc:  # an unreadable report: the message, exit 2, no traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.out is not None:
            args.out.write_text(body, encoding="utf-8")
    sys.stdout.write(body)
    return rc


if __name__ == "__main__":
    sys.exit(main())
