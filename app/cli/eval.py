"""``rag eval``: run suites, record baselines; ``compare`` / ``diff-prompt`` load lazily.

Exit codes: 0 the run passed its gate (``--gate``: every threshold, or only the red lines),
1 it did not (a gated threshold or a red line failed, or the run is partial), 2 bad input or
usage. The status line says which.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from app.cli import options
from app.cli.eval_summary import _print_summary
from app.cli.eval_summary import (
    gate_exit_code as gate_exit_code,  # re-exported (rag eval merge, tests)
)
from app.errors import RagError, RuntimeFailure

if TYPE_CHECKING:
    from app.eval.config import RunConfig

# sub-command name -> (module, attribute); imported only when used, so `rag eval --help`
# works before (and without) app/cli/eval_compare.py.
_LAZY: dict[str, tuple[str, str, str]] = {
    "compare": ("app.cli.eval_compare", "compare", "Compare two reports: metric delta table."),
    "diff-prompt": ("app.cli.eval_compare", "diff_prompt", "Diff two prompt versions."),
    "merge": ("app.cli.eval_merge", "merge_cmd", "Merge shard reports into one report."),
}


class _EvalGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _LAZY:
            return super().get_command(ctx, cmd_name)
        module_name, attr, help_text = _LAZY[cmd_name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            return _missing(cmd_name, module_name, help_text)
        command = getattr(module, attr, None)
        if not isinstance(command, click.Command):
            return _missing(cmd_name, module_name, help_text)
        return command


_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


class Duration(click.ParamType["float", Any]):
    """A duration: ``25h``, ``90m``, ``600s`` or a number of seconds; returned in seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, (int, float)):
            seconds = float(value)
        else:
            text = str(value).strip().lower()
            unit = _UNITS.get(text[-1:])
            try:
                seconds = float(text[:-1] if unit else text) * (unit or 1.0)
            except ValueError:
                self.fail(f"{value!r} is not a duration — write e.g. 25h, 90m or 600s", param, ctx)
        if not 0 < seconds < float("inf"):
            self.fail(f"{value!r}: give a duration above 0 (e.g. 25h)", param, ctx)
        return seconds


class _ConsoleLines(logging.Handler):
    """Log records (INFO and up) as lines on the run's console, above its progress bar."""

    def __init__(self, console: Any) -> None:
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(record.getMessage(), soft_wrap=True, markup=False, highlight=False)
        except Exception:  # a console that cannot print never stops the run
            self.handleError(record)


def _missing(name: str, module: str, help_text: str) -> click.Command:
    def callback() -> None:
        raise click.UsageError(f"`rag eval {name}` is not available: {module} is not installed")

    return click.Command(name, callback=callback, help=f"{help_text} (not installed)")


@click.group(cls=_EvalGroup)
def cli() -> None:
    """Run evaluation suites, compare reports, record baselines."""


@dataclass(frozen=True)
class EvalRunOptions:
    """Everything ``rag eval run`` was given, typed, built once by the click layer
    (:func:`eval_run_options`): the run's configuration and how to run it."""

    config: RunConfig
    resume: str | None = None  # RUN_ID: finish that run with its stored configuration
    out_dir: Path | None = None
    quiet: bool = False
    langfuse: bool = False


def eval_run_options(params: Mapping[str, Any]) -> EvalRunOptions:
    """``rag eval run``'s parameter values (``ctx.params``) as one typed value; a usage
    error names the options that do not go together."""
    from app.eval.config import RunConfig

    suite, dataset_path = params["suite"], params["dataset_path"]
    resume = params["resume"]
    if suite is None and dataset_path is None and resume is None:
        raise click.UsageError("give --suite S or --dataset FILE for a new run, or --resume RUN_ID")
    if suite is not None and dataset_path is not None:
        raise click.UsageError("give --suite S or --dataset FILE, not both")
    if dataset_path is not None and params["dataset_version"] is not None:
        raise click.UsageError("--dataset-version selects a suite's version; not with --dataset")
    if dataset_path is not None:
        from app.eval.datasets.check import suite_of

        suite = suite_of(dataset_path)
    config = RunConfig(
        suite=suite or "",  # with --resume the stored configuration replaces this one
        prompts=tuple(params["prompts"]),
        shard=_shard_option(params["shard"]),
        batch=params["batch"],
        batch_poll_s=params["batch_poll_s"],
        batch_flush_s=params["batch_flush_s"],
        batch_timeout_s=params["batch_timeout_s"],
        gate=params["gate"] or "thresholds",
        **options.run_fields(params),
    )
    # the model strings are parsed here, at the edge, once: an unknown provider is a usage
    # error before anything starts; inward the run reads config.model_ref / judge_ref
    config.model_ref, config.judge_ref  # noqa: B018
    return EvalRunOptions(
        config=config,
        resume=resume,
        out_dir=params["out_dir"],
        quiet=params["quiet"],
        langfuse=params["langfuse"],
    )


def _typed_options(
    command: Callable[[click.Context, EvalRunOptions], None],
) -> Callable[..., None]:
    """The click callback: its options' values become one :class:`EvalRunOptions`."""

    @functools.wraps(command)
    def callback(ctx: click.Context, /, **params: Any) -> None:
        command(ctx, eval_run_options(params))

    return callback


@cli.command("run")
@click.option(
    "--suite",
    default=None,
    help="Dataset suite: smoke, full, hard, adversarial (not needed with --resume).",
)
@options.dataset_version
@options.dataset_path
@options.kb
@click.option(
    "--prompt",
    "prompts",
    multiple=True,
    help="Prompt version to evaluate, e.g. system/kb_qa_v3 (repeatable).",
)
@options.model
@options.judge
@options.judge_samples
@options.repeat
@options.metrics
@options.concurrency
@options.workers
@options.rpm
@options.tpm
@options.timeout
@options.max_attempts
@options.max_errors
@options.retry_budget
@click.option(
    "--resume", "resume", default=None, metavar="RUN_ID", help="Finish an interrupted run."
)
@options.report_out
@options.max_cost
@options.no_cache
@options.refresh_cache
@options.fresh_answers
@click.option(
    "--shard",
    "shard",
    default=None,
    metavar="I/N",
    help="Run shard I of N (stable by case id; 1-based); `rag eval merge` joins the reports. "
    "Default $RAG_SHARD, or JOB_COMPLETION_INDEX/RAG_SHARD_COUNT (a Kubernetes Indexed Job).",
)
@click.option(
    "--batch",
    "batch",
    is_flag=True,
    help="Send cache-missing calls through the provider's batch API (Anthropic Message "
    "Batches, OpenAI Batch): about half price, results within 24 h; --resume re-attaches.",
)
@click.option(
    "--batch-poll",
    "batch_poll_s",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds before the first status poll of a batch (then x1.5, at most 300).",
)
@click.option(
    "--batch-timeout",
    "batch_timeout_s",
    default="25h",
    show_default=True,
    type=Duration(),
    help="Give up waiting for a batch that has not ended after this long (25h, 90m, 600s): "
    "its calls fail with a message, the batch stays recorded and --resume re-attaches to it "
    "(nothing is submitted twice). Both APIs end a batch within 24 h.",
)
@click.option(
    "--batch-flush",
    "batch_flush_s",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Submit a batch once no new call has arrived for this many seconds.",
)
@options.limit
@options.allow_weak_judge
@options.k
@options.seed
@options.retriever
@options.embedder
@options.max_tokens
@options.temperature
@options.injection_policy
@options.allow_unlisted_model
@click.option("--quiet", is_flag=True, help="No progress bar.")
@options.gate
@click.option(
    "--langfuse",
    "langfuse",
    is_flag=True,
    help="Upload the run to Langfuse as a dataset run (LANGFUSE_PUBLIC_KEY/SECRET_KEY/HOST).",
)
@click.pass_context
@_typed_options
def run_cmd(ctx: click.Context, run: EvalRunOptions) -> None:
    """Run a suite through the pipeline, score it, write reports/eval_<UTC>.json (+ .md)."""
    from app.eval.run.runner import new_run_id, run_sync

    config, resume, out_dir, quiet, langfuse = (
        run.config,
        run.resume,
        run.out_dir,
        run.quiet,
        run.langfuse,
    )
    suite = config.suite or None
    # per-answer audit warnings (injection detected, invalid citations) are in each case's
    # trace in the report; printed here they would only interleave with the progress bar
    logging.getLogger("app.generation").setLevel(logging.ERROR)
    if langfuse:  # fail in a second, not after the suite
        from app.integrations.langfuse import preflight

        preflight()
    run_id = resume or new_run_id()
    # --quiet: no bar, and rich (≈ 55 modules) is not imported before the first request
    err, progress = (_Plain(), None) if quiet else _progress_bar()
    err.print(
        f"run {run_id}"
        + (" (resuming with its stored configuration; other options are ignored)" if resume else "")
    )
    if config.repeat > 1:  # (a run asked once does not import --repeat's code before it starts)
        from app.eval.run.repeat import offline_note

        if (note := offline_note(config)) is not None:
            err.print(note)
    task = (
        None
        if progress is None
        else progress.add_task(suite or run_id, total=None, cost=0.0, errors=0)
    )

    def on_progress(p: Any) -> None:
        if progress is None:
            return
        # the bar appears with the first update, so a configuration error is not
        # preceded by an empty bar
        if not progress.live.is_started:
            progress.start()
        progress.update(task, total=p.total, completed=p.done, cost=p.cost, errors=p.errors)

    command = ["rag", *(shlex.quote(a) for a in sys.argv[1:])] if sys.argv else []
    # a batch's progress and a provider that stops answering, printed above the bar
    batch_log = logging.getLogger("app.llm.batch")
    batch_lines = _ConsoleLines(err)
    batch_log.addHandler(batch_lines)
    batch_level = batch_log.level
    batch_log.setLevel(logging.INFO)
    try:
        try:
            outcome = run_sync(
                config,
                resume=resume,
                out_dir=out_dir,
                command=command,
                front_end="cli",
                on_progress=on_progress,
                run_id=run_id,
            )
        finally:
            if progress is not None:
                progress.stop()
            batch_log.removeHandler(batch_lines)
            batch_log.setLevel(batch_level)
    except KeyboardInterrupt:
        err.print(
            f"interrupted: finished cases are checkpointed; resume with rag eval run --resume {run_id}"
        )
        ctx.exit(130)
    if outcome.already_finished:
        err.print(
            f"run {run_id} had already finished: nothing to resume, nothing written "
            f"(its report: {outcome.path})",
            soft_wrap=True,
        )
    _print_summary(outcome.summary, outcome.path, outcome.markdown)
    if langfuse:
        from app.integrations.langfuse import export_run

        try:
            exported = export_run(outcome.report)
        except RagError:
            raise
        except Exception as exc:  # the SDK's and the network's errors: the report is safe
            from app.redact import redact

            # redact before cutting: a secret cut in half no longer matches
            raise RuntimeFailure(
                f"langfuse: upload to {os.environ.get('LANGFUSE_HOST')} failed "
                f"({type(exc).__name__}: {redact(str(exc))[:300]}); the report is at "
                f"{outcome.path}"
            ) from None
        err.print(
            f"langfuse: {exported.items} items, {exported.traces} traces, {exported.scores} scores"
            f" → run {exported.run_name} of dataset {exported.dataset}"
            + (f" {exported.url}" if exported.url else "")
        )
    ctx.exit(gate_exit_code(outcome.summary, echo=False))


class _Plain:
    """``Console.print`` on stderr without rich (``--quiet``): the text as given."""

    def print(self, text: str, **_: Any) -> None:
        click.echo(text, err=True)


def _progress_bar() -> tuple[Any, Any]:
    """rich's stderr console and the run's progress bar."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    err = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("cost ${task.fields[cost]:.4f} · errors {task.fields[errors]}"),
        console=err,
        transient=False,
    )
    return err, progress


def _shard_option(shard: str | None) -> str | None:
    """``--shard``, else ``$RAG_SHARD``, else a Kubernetes Indexed Job's 0-based
    ``JOB_COMPLETION_INDEX`` with ``$RAG_SHARD_COUNT``; checked like the option."""
    from app.eval.config import parse_shard

    if shard is None:
        shard = os.environ.get("RAG_SHARD") or None
    if shard is None and "JOB_COMPLETION_INDEX" in os.environ:
        count = os.environ.get("RAG_SHARD_COUNT")
        if not count:
            raise click.UsageError(
                "JOB_COMPLETION_INDEX is set: also set RAG_SHARD_COUNT (the Job's completions)"
            )
        try:
            shard = f"{int(os.environ['JOB_COMPLETION_INDEX']) + 1}/{int(count)}"
        except ValueError:
            raise click.UsageError(
                "JOB_COMPLETION_INDEX and RAG_SHARD_COUNT must be integers"
            ) from None
    if shard is not None:
        try:
            parse_shard(shard)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--shard") from None
    return shard


@cli.command("baseline")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--prompt", required=True, help="The prompt version the report measured, e.g. system/kb_qa_v2."
)
def baseline_cmd(report: Path, prompt: str) -> None:
    """Record REPORT as PROMPT's baseline under reports/baselines/."""
    from app.eval.report.baseline import record_baseline

    path = record_baseline(report, prompt)
    click.echo(f"recorded {report} as the baseline of {prompt}: {path}")
