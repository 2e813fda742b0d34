"""``rag eval compare`` and ``rag eval diff-prompt``.

The ``rag eval`` group (app/cli/eval.py) imports the two click commands defined here
lazily: ``compare`` and ``diff_prompt`` (command name ``diff-prompt``).

Exit codes: 0 ok, 1 a regression with ``--fail-on-regression``, 2 bad input (unreadable
report, ruler mismatch without ``--allow-ruler-change``, ground-truth mismatch without
``--allow-truth-change``, unknown prompt version).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.cli import options
from app.errors import UserError

if TYPE_CHECKING:
    from app.eval.compare import Comparison
    from app.eval.config import RunConfig

_FORMATS = click.Choice(["md", "json", "html"])


def _emit(comparison: Comparison, fmt: str, out: Path | None) -> None:
    from app.eval.compare import comparison_markdown
    from app.safe_io import atomic_write_text

    text = comparison_markdown(comparison) if fmt == "md" else comparison.to_json() + "\n"
    if out is not None:
        with _writable(out):
            atomic_write_text(out, text)
    click.echo(text, nl=False)


@contextlib.contextmanager
def _writable(out: Path) -> Iterator[None]:
    """An ``OSError`` while writing ``out`` as the user's error (exit 2), not a traceback."""
    try:
        yield
    except OSError as exc:
        raise UserError(
            f"{out}: cannot write it ({exc.strerror or exc}) — give -o a path in a folder "
            "you can write to"
        ) from None


def _finish(comparison: Comparison, fail_on_regression: bool) -> None:
    if fail_on_regression and comparison.has_regression:
        click.echo("regression: at least one metric is ❌ (see the table)", err=True)
        raise click.exceptions.Exit(1)


@click.command("compare")
@click.argument("base", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("new", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=_FORMATS, default="md", show_default=True)
@options.fail_on_regression
@options.allow_ruler_change
@options.allow_truth_change
@click.option("-o", "--out", type=click.Path(path_type=Path, dir_okay=False), default=None)
def compare(
    base: Path,
    new: Path,
    fmt: str,
    fail_on_regression: bool,
    allow_ruler_change: bool,
    allow_truth_change: bool,
    out: Path | None,
) -> None:
    """Print the metric delta table of NEW against BASE (two eval report JSON files).

    Cases are paired by id; continuous metrics use Wilcoxon signed-rank + a paired
    bootstrap CI, rates use exact McNemar, and a Brown–Forsythe test flags variance growth.
    ``--format html`` writes the viewer's compare page (the delta table, then every case's
    two answers side by side with a word diff) to OUT (default:
    compare_<base>_vs_<new>.html beside NEW) and one page per case in OUT's _cases/ folder.
    """
    from app.eval.compare import compare_files, compare_reports

    if fmt != "html":
        comparison = compare_files(
            base,
            new,
            allow_ruler_change=allow_ruler_change,
            allow_truth_change=allow_truth_change,
        )
        _emit(comparison, fmt, out)
        _finish(comparison, fail_on_regression)
        return
    from app.eval.report.io import load_report
    from app.view.export import export_compare

    base_report, new_report = load_report(base), load_report(new)
    comparison = compare_reports(
        base_report,
        new_report,
        base_name=str(base),
        new_name=str(new),
        allow_ruler_change=allow_ruler_change,
        allow_truth_change=allow_truth_change,
    )
    target = out or new.with_name(f"compare_{base.stem}_vs_{new.stem}.html")
    with _writable(target):
        written = export_compare(base_report, new_report, comparison, target)
    click.echo(f"{target} (+ {len(written) - 1} case pages in {target.stem}_cases/)")
    _finish(comparison, fail_on_regression)


@click.command("diff-prompt")
@click.argument("name")
@click.argument("base_version")
@click.argument("new_version")
@click.option(
    "--suite",
    default=None,
    help="Dataset suite: smoke (default), full, hard, adversarial; or --dataset FILE.",
)
@options.run_options
@options.allow_ruler_change
@options.allow_truth_change
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@options.fail_on_regression
@click.option(
    "--out-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder of the two runs' reports (default reports/).",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the comparison (--format) to this file.",
)
@click.pass_context
def diff_prompt(
    ctx: click.Context,
    /,
    name: str,
    base_version: str,
    new_version: str,
    suite: str | None,
    fmt: str,
    fail_on_regression: bool,
    allow_ruler_change: bool,
    allow_truth_change: bool,
    out_dir: Path | None,
    out: Path | None,
    **_run: Any,
) -> None:
    """Run prompt NAME at BASE_VERSION and NEW_VERSION on the same suite and compare.

    NAME is a prompt id (``system/kb_qa``); versions are ``v1``/``1``/``kb_qa_v1`` or the
    qualified id. Every option of ``rag eval run`` that sets a run applies to both runs.
    Before the first run the dataset version, the knowledge base and the judge are resolved
    and pinned, so a dataset version released (or a default changed) meanwhile cannot make
    the two runs incomparable. Both runs share the response cache, so everything that does
    not depend on the prompt (retrieval, unchanged judge calls) is computed once.
    """
    from app.eval.config import RunConfig as Config

    fields = options.run_fields(ctx.params)
    if suite is not None and fields["dataset_path"] is not None:
        raise click.UsageError("give --suite S or --dataset FILE, not both")
    if fields["dataset_path"] is not None and fields["dataset_version"] is not None:
        raise click.UsageError("--dataset-version selects a suite's version; not with --dataset")
    if fields["dataset_path"] is not None:
        from app.eval.datasets.check import suite_of

        suite = suite_of(Path(fields["dataset_path"]))
    config = Config(suite=suite or "smoke", **fields)
    comparison = run_diff_prompt(
        name,
        base_version,
        new_version,
        config=config,
        out_dir=out_dir,
        allow_ruler_change=allow_ruler_change,
        allow_truth_change=allow_truth_change,
    )
    _emit(comparison, fmt, out)
    _finish(comparison, fail_on_regression)


def qualified_version(name: str, version: str) -> str:
    """``system/kb_qa`` + ``v2`` / ``2`` / ``kb_qa_v2`` / ``system/kb_qa_v2`` → ``system/kb_qa_v2``."""
    from app.errors import PromptError

    pid = name.strip().strip("/")
    text = version.strip()
    m = re.fullmatch(r"(?:.*_)?v?([1-9][0-9]*)", text)
    if "/" not in pid or m is None:
        raise PromptError(
            f"diff-prompt {name} {version}: NAME is <category>/<slug> (e.g. system/kb_qa) and a "
            "version is v<N>, <N> or the qualified id (system/kb_qa_v2)"
        )
    if text.startswith(pid.split("/")[-1] + "_v") or text.startswith(pid + "_v") or "_" not in text:
        return f"{pid}_v{m.group(1)}"
    raise PromptError(f"diff-prompt: version {version!r} does not belong to prompt {pid}")


def pin(config: RunConfig) -> RunConfig:
    """``config`` with what a default would resolve at run time fixed now: the dataset
    version (a suite's newest, or a file's sha256 checked later), the knowledge base's folder
    and the judge. The run's dataset is checked here, so a bad one fails before any call."""
    from app.eval.run.runner import load_run_dataset
    from app.paths import kb_dir

    suite = load_run_dataset(config)  # DatasetError (exit 2) before the first run
    pinned: dict[str, Any] = {"kb_path": config.kb_path or str(kb_dir().resolve())}
    if config.dataset_path is None:
        pinned["dataset_version"] = suite.version
    return config.replace(**pinned)


def _pinned_what(base: Any, new: Any) -> list[str]:
    """What differs between the two runs' reports although it was pinned (dataset file bytes
    or knowledge-base content): it changed on disk while diff-prompt ran."""
    out: list[str] = []
    b_sets = {(d.name, d.version): d.sha256 for d in base.meta.datasets}
    for d in new.meta.datasets:
        old = b_sets.get((d.name, d.version))
        if old is not None and old != d.sha256:
            out.append(f"dataset {d.name} v{d.version} ({d.path}) changed between the two runs")
    b_kb, n_kb = base.meta.kb, new.meta.kb
    if b_kb is not None and n_kb is not None and b_kb.sha256 != n_kb.sha256:
        changed = sorted(
            p
            for p in {*b_kb.documents, *n_kb.documents}
            if b_kb.documents.get(p) != n_kb.documents.get(p)
        )
        out.append(
            f"knowledge base {n_kb.path} changed between the two runs: {', '.join(changed[:5])}"
        )
    return out


def run_diff_prompt(
    name: str,
    base_version: str,
    new_version: str,
    *,
    config: RunConfig,
    out_dir: Path | None = None,
    allow_ruler_change: bool = False,
    allow_truth_change: bool = False,
) -> Comparison:
    """Run both versions on the same cases (one shared response cache) and compare them.

    ``config`` is the runs' configuration (its ``prompts`` are replaced); :func:`pin` fixes
    its dataset version, knowledge base and judge before the first run. The two runs differ
    only in ``RunConfig.prompts``; everything that does not depend on the prompt (judge calls
    on identical answers, rewrites) is answered from the cache on the second run. Both
    reports are written (default ``reports/``) so they can be compared again with
    ``rag eval compare``.
    """
    from app.errors import ReportError
    from app.eval.compare import compare_reports
    from app.eval.run.runner import run_sync
    from app.generation.registry import load_registry

    registry = load_registry()
    base_q = qualified_version(name, base_version)
    new_q = qualified_version(name, new_version)
    for q in (base_q, new_q):
        registry.get(q)  # PromptError (exit 2) naming the known versions
    if base_q == new_q:
        raise UserError(f"diff-prompt: both versions are {base_q}; pass two different versions")
    config = pin(config)
    what = (
        f"dataset {config.dataset_path}"
        if config.dataset_path
        else f"{config.suite} v{config.dataset_version}"
    )
    click.echo(
        f"diff-prompt: pinned {what}, knowledge base {config.kb_path}, judge {config.judge}",
        err=True,
    )
    from app.eval.run.repeat import offline_note

    if (note := offline_note(config)) is not None:
        click.echo(f"diff-prompt: {note}", err=True)
    outcomes = []
    for q in (base_q, new_q):
        click.echo(f"diff-prompt: running {what} with {q} …", err=True)
        outcome = run_sync(config.replace(prompts=(q,)), out_dir=out_dir, front_end="cli")
        click.echo(f"diff-prompt: {q} → {outcome.path}", err=True)
        outcomes.append(outcome)
    base, new = outcomes
    changed = _pinned_what(base.report, new.report)
    if changed and not allow_truth_change:
        raise ReportError(
            "diff-prompt: " + "; ".join(changed) + f" — the reports ({base.path}, {new.path}) "
            "measured different things; run diff-prompt again once the files are stable, or "
            "compare them anyway with rag eval compare --allow-truth-change --allow-ruler-change"
        )
    try:
        return compare_reports(
            base.report,
            new.report,
            base_name=str(base.path or base_q),
            new_name=str(new.path or new_q),
            allow_ruler_change=allow_ruler_change,
            allow_truth_change=allow_truth_change,
        )
    except ReportError as exc:
        raise ReportError(
            f"diff-prompt: {exc} (both runs were pinned to {what}; something else changed "
            "between them)"
        ) from None
