"""The ``rag`` command.

Exit codes (a stable contract): 0 ok, 1 a check failed, 2 bad input or usage.
Sub-command groups live in their own modules and are imported only when used, so
``rag --help`` and ``rag prompts check`` never pay for pandas, scipy or the SDKs.
"""

from __future__ import annotations

import importlib
import sys
from types import TracebackType
from typing import Any

import click

from app.errors import RagError, RuntimeFailure, UserError

# command name -> module under app.cli that defines ``cli`` (a click command or group)
_COMMANDS: dict[str, tuple[str, str]] = {
    "prompts": ("app.cli.prompts", "Versioned prompt modules: list, show, render, check, new, ..."),
    "datasets": (
        "app.cli.datasets",
        "Golden JSONL datasets: check, stats, new-version, edit, export, import.",
    ),
    "eval": ("app.cli.eval", "Run evaluation suites, compare reports, record baselines."),
    "ask": ("app.cli.ask", "Ask the RAG pipeline one question and print answer + trace."),
    "judge": ("app.cli.judge", "Judge governance: calibrate a judge against human labels."),
    "kb": (
        "app.cli.kb",
        "The knowledge base: list chunk ids with heading, ACL, first line; embed them.",
    ),
    "report": ("app.cli.report", "Render a JSON report as HTML or markdown."),
    "shadow": ("app.cli.shadow", "Replay logged questions through a candidate prompt/model."),
    "feedback": ("app.cli.feedback", "Record a user's thumbs up/down on a logged answer."),
    "ops": ("app.cli.ops", "Live traffic: compare a staged rollout's arms (ab)."),
    "view": ("app.cli.view", "Browse runs, cases, compares and trends on 127.0.0.1."),
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        # every command reads model strings: the offline baselines register their family
        # (through the public register_provider seam) before any option is parsed
        importlib.import_module("app.baselines")
        module = importlib.import_module(entry[0])
        command = getattr(module, "cli", None)
        if not isinstance(command, click.Command):  # pragma: no cover - programming error
            raise RuntimeError(f"{entry[0]} does not define a click command named `cli`")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(_COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rag-starter", prog_name="rag")
def cli() -> None:
    """rag-starter: versioned prompts, golden datasets, evaluation and comparison.

    Exit codes: 0 ok, 1 a check failed, 2 bad input or usage.
    """


def _redacting_excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    """A crash's traceback goes through the redaction filter before it reaches stderr."""
    import traceback

    from app.redact import redact

    sys.stderr.write(redact("".join(traceback.format_exception(exc_type, exc, tb))))


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: maps our errors to exit codes without a traceback.

    Every log record and an unexpected crash's traceback pass :mod:`app.redact` first.
    As the program's entry point (``argv`` None: the ``rag`` script) the collector skips the
    objects left at exit (:func:`app.runtime.freeze_gc`).
    """
    from app.redact import install_log_redaction
    from app.runtime import freeze_gc, tune_gc

    tune_gc()  # first: the start-up's imports allocate the most
    install_log_redaction()
    sys.excepthook = _redacting_excepthook
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in an echoed input never crashes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        rc = cli.main(args=argv, prog_name="rag", standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(UserError.exit_code)
    except RuntimeFailure as exc:
        click.echo(f"failed: {exc}", err=True)
        sys.exit(RuntimeFailure.exit_code)
    except RagError as exc:  # pragma: no cover - every RagError is one of the two above
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    finally:
        if argv is None:  # the process ends now (a caller passing argv, a test, goes on)
            freeze_gc()
