"""``rag datasets export SUITE --csv|--xlsx`` and ``rag datasets import FILE --suite S``.

Registered on the ``rag datasets`` group; the cell rules are in :mod:`app.eval.datasets.sheets`.
Import writes the suite's next version file (plus a CHANGELOG.md entry), or ``--out FILE``;
it never overwrites a file. Exit 0 written (or nothing changed), 1 the check found an error
(nothing written; every problem names row and column), 2 unreadable input.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import click

from app.errors import DatasetError


@click.command("export")
@click.argument("suite")
@click.option("--csv", "kind", flag_value="csv", help="Write CSV (UTF-8 with BOM).")
@click.option("--xlsx", "kind", flag_value="xlsx", help="Write an Excel workbook.")
@click.option("--version", "version", default=None, metavar="X.Y", help="Default: the newest.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--lang",
    type=click.Choice(["zh", "en"]),
    default=None,
    help="Language of the help sheet and the messages.",
)
def export_cmd(
    suite: str, kind: str | None, version: str | None, out: Path | None, lang: str | None
) -> None:
    """Write SUITE as a spreadsheet, one row per case (default file: <suite>_v<x.y>.<kind>)."""
    from app.eval.datasets.case import load_suite
    from app.eval.datasets.messages import resolve_lang, say
    from app.eval.datasets.sheets import export_rows, write_sheet

    if kind is None:
        raise click.UsageError("give --csv or --xlsx")
    code = resolve_lang(lang)
    data = load_suite(suite, version)
    target = out or Path(f"{data.name}_v{data.version}.{kind}")
    if target.exists():
        raise DatasetError(say("sheet.exists", code, target=target))
    write_sheet(export_rows(data), target, kind, lang=code)
    n = len(data.cases)
    click.echo(
        say("sheet.exported", code, target=target, n=n, suite=data.name, version=data.version)
    )


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--suite", required=True, help="The suite the cases belong to.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write this JSONL file instead of the suite's next version.",
)
@click.option("--note", default=None, help="The CHANGELOG line (what changed and why).")
@click.option("--lang", type=click.Choice(["zh", "en"]), default=None)
@click.pass_context
def import_cmd(
    ctx: click.Context,
    file: Path,
    suite: str,
    out: Path | None,
    note: str | None,
    lang: str | None,
) -> None:
    """Read a CSV/XLSX sheet of SUITE's cases, check it, write the next version.

    An unreleased draft (the newest file, not yet committed) is updated in place instead of
    making a second new version; the note goes into its CHANGELOG entry either way.
    """
    from app.eval.datasets.case import FILE_NAME_RE, available_suites
    from app.eval.datasets.check import suite_ids
    from app.eval.datasets.commits import git_saves
    from app.eval.datasets.messages import resolve_lang, say
    from app.eval.datasets.sheets import read_sheet, rows_to_jsonl
    from app.eval.datasets.store import Write, commit, digest, locked, read_file
    from app.eval.datasets.versions import (
        CHANGELOG_STUB,
        author,
        changelog_write,
        is_released,
        next_version_name,
        raise_versions,
        released_cases,
        with_entry,
        with_note,
    )
    from app.paths import datasets_dir, kb_dir
    from app.retrieval.kb import load_kb
    from app.safe_io import create_new_bytes

    code = resolve_lang(lang)
    if not file.is_file():
        raise DatasetError(f"{file}: file not found — check the path")
    if FILE_NAME_RE.match(suite + "_v1.0.jsonl") is None:
        raise DatasetError(f"--suite {suite!r}: use a lower-case name such as smoke or hr_faq")
    folder = datasets_dir()
    cases, letters, issues = read_sheet(file, lang=code)
    saves = git_saves(folder)  # the editor's rule: released = on the base branch
    released = saves.released if saves is not None else is_released
    # the editor's rule too: a case whose content changed gets its version raised
    raised = raise_versions(cases, released_cases(folder, suite, released))
    text, checked = rows_to_jsonl(
        cases,
        suite=suite,
        file=file.name,
        kb=load_kb(kb_dir()),
        letters=letters,
        other_ids=suite_ids(folder, besides=suite),
        lang=code,
    )
    every = issues + checked  # the warnings too: the expert sees what the check would say
    for issue in sorted(every, key=lambda i: (i.row, i.severity != "error")):
        click.echo(issue.format(file.name))
    problems = [i for i in every if i.severity == "error"]
    warnings = len(every) - len(problems)
    if problems:
        click.echo(say("sheet.errors", code, n=len(problems)))
        ctx.exit(1)
    if warnings:
        click.echo(say("sheet.warnings", code, n=warnings))
    with locked(folder):  # the newest file read and the next one written as one step
        versions = available_suites(folder).get(suite)
        newest = versions[-1][1] if versions else None
        current = read_file(newest) if newest is not None else b""
        if out is None and newest is not None and current == text.encode("utf-8"):
            click.echo(say("sheet.identical", code, n=len(cases), name=newest.name))
            return
        if raised:
            click.echo(
                say(
                    "sheet.raised",
                    code,
                    ids="、".join(raised) if code == "zh" else ", ".join(raised),
                )
            )
        draft = out is None and newest is not None and not released(newest)
        if draft and versions and newest is not None:
            (major, minor), _ = versions[-1]
            line = note or f"imported `{file.name}` (`rag datasets import`)"
            version = f"{major}.{minor}"
            edit = lambda t: with_note(t, suite, version, line, who=author())  # noqa: E731
            # the draft is not released: it is updated, not copied (with its CHANGELOG note)
            commit(
                folder,
                [
                    Write(newest, text.encode("utf-8"), digest(current)),
                    changelog_write(folder, edit),
                ],
            )
            click.echo(say("sheet.wrote", code, target=newest, n=len(cases)))
            return
        if out is not None:
            try:  # fsynced, complete when it appears, never replaces a file (app.safe_io)
                create_new_bytes(out, text.encode("utf-8"))
            except FileExistsError:
                raise DatasetError(f"{out}: already exists — nothing written") from None
            click.echo(say("sheet.wrote", code, target=out, n=len(cases)))
            return
        if versions:
            (major, minor), _ = versions[-1]
            name, version = next_version_name(suite, major, minor, False)
            target, title = folder / name, f"{suite} v{version}"
        else:
            target, title = folder / f"{suite}_v1.0.jsonl", f"{suite} v1.0"
        if os.path.lexists(target):
            raise DatasetError(f"{target}: already exists — nothing written")
        day = dt.datetime.now(dt.UTC).date().isoformat()
        head = f"{title} — {day} — {author()}"
        body = f"imported from `{file.name}` (`rag datasets import`).\n\n- {note or CHANGELOG_STUB}"
        commit(
            folder,
            [
                Write(target, text.encode("utf-8"), None),  # never replaces a file
                changelog_write(folder, lambda t: with_entry(t, head, body)),
            ],
        )
    click.echo(say("sheet.wrote", code, target=target, n=len(cases)))
