"""``rag datasets``: check and describe the golden JSONL datasets.

::

    rag datasets check [PATH…] [--json] [--changed-since REV] [--lang zh|en]
    rag datasets stats [--json]
    rag datasets new-version SUITE [--major] [--note TEXT]
    rag datasets edit [--port P] [--lang zh|en]        # the browser case editor, 127.0.0.1 only
    rag datasets export SUITE --csv|--xlsx [--out FILE]
    rag datasets import FILE --suite S [--out FILE]
    rag datasets anchor [FILE…] [--replace]            # labels follow their passage
    rag datasets repoint CASE OLD_ID NEW_ID…           # a label whose passage changed

Exit codes: 0 clean, 1 a check found an error, 2 unreadable input (missing file, not
UTF-8, unknown git revision).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from app.errors import DatasetError
from app.eval.datasets.case import load_all_suites, suite_stats
from app.eval.datasets.check import check_paths


@click.group(name="datasets")
def cli() -> None:
    """Golden JSONL datasets: check, stats, new-version, edit."""


@cli.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--changed-since",
    "changed_since",
    metavar="REV",
    help="Also fail when a dataset changed since REV without a CHANGELOG.md entry, "
    "or a released file was edited in place.",
)
@click.option(
    "--lang",
    type=click.Choice(["zh", "en"]),
    default=None,
    help="Language of the messages (default: $RAG_LANG, else the locale, else en).",
)
@click.pass_context
def check(
    ctx: click.Context,
    paths: tuple[Path, ...],
    as_json: bool,
    changed_since: str | None,
    lang: str | None,
) -> None:
    """Check dataset files (default: every tests/eval/datasets/*.jsonl).

    Every line of every file is read; each problem is printed as
    `file:line: field: what is wrong — how to fix`.
    """
    result = check_paths(list(paths) or None, changed_since=changed_since, lang=lang)
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        for line in capped_lines(result.issues):
            click.echo(line)
        click.echo(result.summary())
    if result.fatal:
        unreadable = [i.format() for i in result.issues if i.code in {"unreadable", "kb"}]
        raise DatasetError("unreadable input:\n" + "\n".join(unreadable))
    ctx.exit(result.exit_code)


#: messages of one kind (file, field, code) printed before the rest are counted in one line
MAX_SAME = 20


def capped_lines(issues: list[Any], max_same: int = MAX_SAME) -> list[str]:
    """Each issue's line, at most ``max_same`` of one kind (file, field, code); the rest of a
    kind as one line after them (300 KB of ``{}`` lines printed 102 MB before)."""
    from app.eval.datasets.messages import say

    shown: dict[tuple[str, str, str], int] = {}
    rest: dict[tuple[str, str, str], list[Any]] = {}
    out: list[str] = []
    for issue in issues:
        kind = (issue.file, issue.field, issue.code)
        if shown.get(kind, 0) < max_same:
            shown[kind] = shown.get(kind, 0) + 1
            out.append(issue.format())
        else:
            rest.setdefault(kind, []).append(issue)
    for (file, field, code), more in rest.items():
        lines = [i.line for i in more if i.line is not None]
        out.append(
            say(
                "capped",
                more[0].lang,
                file=file,
                n=len(more),
                field=f"{field}: " if field else "",
                code=code,
                first=min(lines, default="?"),
                last=max(lines, default="?"),
            )
        )
    return out


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


@cli.command("new-version")
@click.argument("suite")
@click.option("--major", is_flag=True, help="Bump the major version (cases deleted, acl meaning).")
@click.option("--note", default=None, help="What changes and why (the CHANGELOG entry's line).")
def new_version_cmd(suite: str, major: bool, note: str | None) -> None:
    """Copy the newest SUITE file to the next version and add a CHANGELOG.md stub.

    The copy is where you edit: a newer version supersedes the older one, and the same id
    in both is the same case, updated. Released files are never edited in place.
    """
    from app.eval.datasets.versions import new_version

    path = new_version(suite, major=major, note=note)
    click.echo(f"wrote {_shown(path)} (a copy of the previous version) and a CHANGELOG.md entry")
    if note is None:
        click.echo("next: edit the new file, then replace the CHANGELOG placeholder line")


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


@cli.command("edit")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option("--lang", type=click.Choice(["zh", "en"]), default=None, help="Language of the help.")
def edit_cmd(port: int, lang: str | None) -> None:
    """Edit cases in the browser (served on 127.0.0.1 only; Ctrl-C stops it).

    Saves go into the next version file plus a CHANGELOG.md entry (never into a released
    file); every save is checked by the same checker as `rag datasets check`, and in a git
    work tree is a commit in the expert's name on a branch for the change. The candidates
    `rag datasets mine` wrote under reports/candidates/ open there too, for review and
    acceptance into a suite; /calibrate is the judge-calibration queue (blind 1–5 scores of
    judged cases from a report, stored in tests/eval/calibration/).
    """
    from app.eval.datasets.commits import git_saves
    from app.eval.datasets.editor_http import serve
    from app.eval.datasets.versions import author, is_released
    from app.eval.report.calibration_queue import CalibrationQueue, calibration_routes
    from app.paths import datasets_dir, kb_dir, repo_root, reports_dir
    from app.retrieval.kb import load_kb

    git = git_saves(datasets_dir())

    def who() -> str | None:
        if git is None:
            return author()
        expert = git.expert()
        return None if expert is None else expert.name

    queue = CalibrationQueue(
        reports=reports_dir(),
        folder=repo_root() / "tests" / "eval" / "calibration",
        kb=load_kb(kb_dir()),
        root=repo_root(),
        who=who,
        released=git.released if git is not None else is_released,
    )
    try:
        server = serve(
            datasets_dir(),
            kb_dir(),
            port=port,
            lang=lang,
            candidates=reports_dir() / "candidates",
            routes=calibration_routes(queue),
        )
    except OSError as exc:
        raise DatasetError(
            f"cannot listen on 127.0.0.1:{port} ({exc.strerror}) — pick another --port"
        ) from None
    click.echo(f"rag datasets edit: http://127.0.0.1:{server.server_address[1]}/  (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.server_close()


@cli.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
def stats(as_json: bool) -> None:
    """Suite sizes and tag / difficulty distributions (newest version of each suite)."""
    data = suite_stats(load_all_suites())
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    suites = data["suites"]
    rows = [
        [
            s["name"],
            s["version"],
            s["cases"],
            s["multi_turn"],
            s["expected_refusal"],
            s["difficulty"]["easy"],
            s["difficulty"]["medium"],
            s["difficulty"]["hard"],
        ]
        for s in suites
    ]
    rows.append(
        [
            "total",
            "",
            data["total_cases"],
            sum(s["multi_turn"] for s in suites),
            sum(s["expected_refusal"] for s in suites),
            *[sum(s["difficulty"][d] for s in suites) for d in ("easy", "medium", "hard")],
        ]
    )
    click.echo(
        _table(
            ["suite", "version", "cases", "multi-turn", "refusal", "easy", "medium", "hard"], rows
        )
    )
    click.echo()
    names = [s["name"] for s in suites]
    tag_rows = [
        [tag, *[counts.get(n, 0) or "" for n in names], sum(counts.values())]
        for tag, counts in data["tags"].items()
    ]
    click.echo(_table(["tag", *names, "total"], tag_rows))


def _register_mine() -> None:
    from app.cli.datasets_anchor import anchor_cmd, repoint_cmd
    from app.cli.datasets_mine import mine_cmd
    from app.cli.datasets_sheets import export_cmd, import_cmd

    cli.add_command(mine_cmd)
    cli.add_command(export_cmd)
    cli.add_command(import_cmd)
    cli.add_command(anchor_cmd)
    cli.add_command(repoint_cmd)


_register_mine()
