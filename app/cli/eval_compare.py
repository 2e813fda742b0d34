"""``rag eval compare`` and ``rag eval diff-prompt``.

The ``rag eval`` group (app/cli/eval.py) imports the two click commands defined here
lazily: ``compare`` and ``diff_prompt`` (command name ``diff-prompt``).

Exit codes: 0 ok, 1 a regression with ``--fail-on-regression``, 2 bad input (unreadable
report, ruler mismatch without ``--allow-ruler-change``, ground-truth mismatch without
``--allow-truth-change``, unknown prompt version).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.errors import UserError

if TYPE_CHECKING:
    from app.eval.compare import Comparison

_FORMATS = click.Choice(["md", "json", "html"])


def _emit(comparison: Comparison, fmt: str, out: Path | None) -> None:
    from app.eval.compare import comparison_markdown

    text = comparison_markdown(comparison) if fmt == "md" else comparison.to_json() + "\n"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    click.echo(text, nl=False)


def _finish(comparison: Comparison, fail_on_regression: bool) -> None:
    if fail_on_regression and comparison.has_regression:
        click.echo("regression: at least one metric is ❌ (see the table)", err=True)
        raise click.exceptions.Exit(1)


@click.command("compare")
@click.argument("base", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("new", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=_FORMATS, default="md", show_default=True)
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a metric is ❌.")
@click.option(
    "--allow-ruler-change",
    is_flag=True,
    help="Compare even if the judge model, judge prompt or dataset version differ.",
)
@click.option(
    "--allow-truth-change",
    is_flag=True,
    help="Compare even if the knowledge base, a prompt's content under one version name or "
    "the resolved retriever differ (the table lists the differences).",
)
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
    written = export_compare(base_report, new_report, comparison, target)
    click.echo(f"{target} (+ {len(written) - 1} case pages in {target.stem}_cases/)")
    _finish(comparison, fail_on_regression)


@click.command("diff-prompt")
@click.argument("name")
@click.argument("base_version")
@click.argument("new_version")
@click.option("--suite", default="smoke", show_default=True)
@click.option("--model", default=None, help="Candidate model (default: the harness default).")
@click.option("--judge", default=None, help="Judge model (default: the harness default).")
@click.option("--concurrency", type=int, default=None)
@click.option("--max-tokens", type=click.IntRange(1), default=None, help="Cap every generation.")
@click.option(
    "--allow-unlisted-model",
    is_flag=True,
    help="Run a model outside the prompts' APPLICABLE_MODELS (the table says so).",
)
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a metric is ❌.")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), default=None)
@click.option("-o", "--out", type=click.Path(path_type=Path, dir_okay=False), default=None)
def diff_prompt(
    name: str,
    base_version: str,
    new_version: str,
    suite: str,
    model: str | None,
    judge: str | None,
    concurrency: int | None,
    max_tokens: int | None,
    allow_unlisted_model: bool,
    fmt: str,
    fail_on_regression: bool,
    out_dir: Path | None,
    out: Path | None,
) -> None:
    """Run prompt NAME at BASE_VERSION and NEW_VERSION on the same suite and compare.

    NAME is a prompt id (``system/kb_qa``); versions are ``v1``/``1``/``kb_qa_v1`` or the
    qualified id. Both runs share the response cache, so everything that does not depend
    on the prompt (retrieval, unchanged judge calls) is computed once.
    """
    comparison = run_diff_prompt(
        name,
        base_version,
        new_version,
        suite=suite,
        model=model,
        judge=judge,
        concurrency=concurrency,
        out_dir=out_dir,
        max_tokens=max_tokens,
        allow_unlisted_model=allow_unlisted_model,
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


def run_diff_prompt(
    name: str,
    base_version: str,
    new_version: str,
    *,
    suite: str = "smoke",
    model: str | None = None,
    judge: str | None = None,
    concurrency: int | None = None,
    out_dir: Path | None = None,
    max_tokens: int | None = None,
    allow_unlisted_model: bool = False,
) -> Comparison:
    """Run both versions on the same cases (one shared response cache) and compare them.

    The two runs differ only in ``RunConfig.prompts``; everything that does not depend on
    the prompt (judge calls on identical answers, rewrites) is answered from the cache on
    the second run. Both reports are written (default ``reports/``) so they can be
    compared again with ``rag eval compare``.
    """
    from app.eval.compare import compare_reports
    from app.eval.config import RunConfig
    from app.eval.run.runner import run_sync
    from app.generation.registry import load_registry

    registry = load_registry()
    base_q = qualified_version(name, base_version)
    new_q = qualified_version(name, new_version)
    for q in (base_q, new_q):
        registry.get(q)  # PromptError (exit 2) naming the known versions
    if base_q == new_q:
        raise UserError(f"diff-prompt: both versions are {base_q}; pass two different versions")
    extra: dict[str, Any] = {}
    if model is not None:
        extra["model"] = model
    if judge is not None:
        extra["judge"] = None if judge.lower() == "none" else judge
    if concurrency is not None:
        extra["concurrency"] = concurrency
    if max_tokens is not None:
        extra["max_tokens"] = max_tokens
    if allow_unlisted_model:
        extra["allow_unlisted_model"] = True
    outcomes = []
    for q in (base_q, new_q):
        click.echo(f"diff-prompt: running {suite} with {q} …", err=True)
        config = RunConfig(suite=suite, prompts=(q,), **extra)
        outcome = run_sync(config, out_dir=out_dir, front_end="cli")
        click.echo(f"diff-prompt: {q} → {outcome.path}", err=True)
        outcomes.append(outcome)
    base, new = outcomes
    return compare_reports(
        base.report,
        new.report,
        base_name=str(base.path or base_q),
        new_name=str(new.path or new_q),
    )
