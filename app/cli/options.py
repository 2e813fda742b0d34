"""Options several commands share: one definition each (name, type, default, help).

``rag ask``, ``rag eval run``, ``rag eval merge`` and ``rag kb chunks`` take the same
``--retriever``, ``--kb``, ``--out``, ``--gate``, … : each is declared here once and applied
as a decorator, so a default or a help text cannot drift apart between commands. Only
``click`` is imported (``rag --help`` stays fast).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_MODEL = "offline:extractive"  # = app.eval.config.DEFAULT_MODEL (a test checks)

retriever = click.option(
    "--retriever",
    type=click.Choice(["auto", "hybrid", "bm25"]),
    default="auto",
    show_default=True,
    help="auto: BM25 fused with the local dense embedder when it is installed; bm25: lexical only.",
)

kb = click.option(
    "--kb",
    "kb_path",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Knowledge-base folder (default tests/eval/kb/sample); chunk ids are "
    "<folder name>:<path>#<n>.",
)

report_out = click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Report folder (default reports/).",
)

gate = click.option(
    "--gate",
    type=click.Choice(["thresholds", "red-lines"]),
    default=None,
    help="What sets the run's status and exit 1: every threshold (a run's default), or only "
    "red-line metrics (e.g. acl_leak) — the gate for offline-baseline runs, whose quality "
    "numbers are not a model's. `rag eval merge`: default the gate the shards were run with.",
)

model = click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    help="Candidate provider string, e.g. anthropic:claude-sonnet-4-6.",
)

timeout = click.option(
    "--timeout",
    "timeout_s",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds per request attempt; an abandoned attempt closes its connection.",
)

max_attempts = click.option(
    "--max-attempts",
    default=4,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Failed attempts per request (retries on 5xx/timeouts/garbled replies; 429s are "
    "waited out apart, up to 2x this).",
)

allow_unlisted_model = click.option(
    "--allow-unlisted-model",
    is_flag=True,
    help="Run a model outside a prompt's APPLICABLE_MODELS instead of refusing; the answer or "
    "report (and every table built from it) says so.",
)


def as_json(what: str) -> Callable[[F], F]:
    """``--json``: print WHAT as JSON instead of text."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")


class _Workers(click.ParamType["int | Literal['auto']", Any]):
    """``--workers``: ``auto`` or a process count from 1 to 64."""

    name = "auto|N"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | Literal["auto"]:
        if value == "auto":
            return "auto"
        try:
            count = int(value)
        except (TypeError, ValueError):
            count = 0
        if not 1 <= count <= 64:
            self.fail(f"{value!r}: give auto or a number of processes from 1 to 64", param, ctx)
        return count


WORKERS = _Workers()
