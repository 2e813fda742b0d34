"""``rag ask "问题"``: run the generation pipeline once and print answer, citations, trace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from app.cli import options
from app.errors import UserError
from app.llm.types import HISTORY_SHAPE, Message, coerce_history


def _read_history(path: Path) -> tuple[Message, ...]:
    """A JSON list of ``{"role", "content"}`` or JSONL with one such object per line."""
    from app.limits import check_history, limit
    from app.safe_io import UnsafeInput, parse_json, read_text

    try:
        text = read_text(path, max_bytes=limit("history_file_bytes"), what="history file")
        if text.lstrip().startswith("["):
            data: Any = parse_json(text, path, what="history file")
        else:
            data = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        data.append(parse_json(line, path, what="history file"))
                    except UnsafeInput as exc:
                        raise UnsafeInput(path, exc.problem, exc.fix, line=n) from None
    except UnsafeInput as exc:
        raise UserError(f"--history {exc}; give a JSON list or JSONL of {HISTORY_SHAPE}") from None
    if not isinstance(data, list):
        raise UserError(f"--history {path}: expected a list of messages")
    turns = coerce_history(data, source=f"--history {path}")
    check_history([t.content for t in turns], f"--history {path}")
    return turns


def _memory_line(memory: Any) -> str:
    """The trace's memory row: history tokens of the budget left after the prompt, or — when
    the prompt alone is over ``max_tokens`` — that, instead of a negative budget."""
    if memory is None:
        return "-"
    tail = f"({memory.counter}), summarised pairs {memory.summarised_pairs}"
    if memory.budget_tokens < 0:
        return (
            f"{memory.history_tokens} tokens of history; the prompt alone is "
            f"{memory.prompt_tokens} tokens, over max_tokens={memory.max_tokens} by "
            f"{-memory.budget_tokens} {tail}"
        )
    return f"{memory.history_tokens}/{memory.budget_tokens} tokens {tail}"


@click.command("ask")
@click.argument("question")
@click.option(
    "--history",
    "history_file",
    type=click.Path(path_type=Path),
    default=None,
    help="JSON list / JSONL of {role, content} messages before the question.",
)
@click.option(
    "--acl",
    "acl",
    multiple=True,
    default=("public",),
    show_default=True,
    help="Reader group(s); repeat or comma-separate (public, employee, hr, finance, exec).",
)
@click.option(
    "--user",
    default=None,
    help="User or session id: picks the arm of a prompt under a staged rollout.",
)
@options.model
@click.option(
    "--prompt",
    "qa_prompt",
    default="system/kb_qa",
    show_default=True,
    help="QA prompt id or exact version.",
)
@options.kb
@options.injection_policy
@options.retriever
@options.embedder
@options.timeout
@options.max_attempts
@click.option("--max-tokens", default=None, type=click.IntRange(1), help="Cap the answer's tokens.")
@click.option(
    "--temperature", default=None, type=click.FloatRange(0, 2), help="The answer's temperature."
)
@options.allow_unlisted_model
@options.as_json("the Answer")
def cli(
    question: str,
    history_file: Path | None,
    acl: tuple[str, ...],
    user: str | None,
    model: str,
    qa_prompt: str,
    kb_path: Path | None,
    injection_policy: str | None,
    retriever: str,
    embedder: str,
    timeout_s: float,
    max_attempts: int,
    max_tokens: int | None,
    temperature: float | None,
    allow_unlisted_model: bool,
    as_json: bool,
) -> None:
    """Ask the RAG pipeline one QUESTION; prints the answer, its citations and the trace."""
    from app.generation.pipeline.config import PipelineConfig
    from app.generation.pipeline.generator import Pipeline
    from app.limits import check_question
    from app.llm.engine import Engine, EngineConfig, invalid_text
    from app.retrieval.kb import ACL_GROUPS

    if not question.strip():
        raise UserError('the question is empty — pass it as an argument: rag ask "年假有几天？"')
    check_question(question, "QUESTION")  # before any work: a 100 KB question costs nothing
    groups = sorted({g.strip() for a in acl for g in a.split(",") if g.strip()})
    if not groups:
        raise UserError(f"--acl: no group given — use one or more of {', '.join(ACL_GROUPS)}")
    unknown = [g for g in groups if g not in ACL_GROUPS]
    if unknown:
        raise UserError(f"--acl {','.join(unknown)}: unknown group — use {', '.join(ACL_GROUPS)}")
    history = _read_history(history_file) if history_file else ()
    settings: dict[str, Any] = {
        "model": model,
        "qa_prompt": qa_prompt,
        "kb_path": kb_path,
        "injection_policy": options.resolved_injection_policy(injection_policy),
        "retriever": retriever,
        "embedder": embedder,
        "allow_unlisted_model": allow_unlisted_model,
    }
    if max_tokens:
        settings["max_answer_tokens"] = max_tokens
    if temperature is not None:
        settings["temperature"] = temperature
    config = PipelineConfig.model_validate(settings)

    async def run() -> Any:
        engine = Engine(EngineConfig(timeout_s=timeout_s, max_attempts=max_attempts))
        try:
            return await Pipeline(config, engine).answer(question, history, groups, user=user)
        finally:
            await engine.aclose()

    with invalid_text() as notes:
        answer = asyncio.run(run())
    for note in notes:  # a reply's lone surrogates were replaced by U+FFFD (app/wellformed.py)
        click.echo(f"warning: {note}", err=True)
    if as_json:
        click.echo(json.dumps(answer.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    t = answer.trace
    click.echo(answer.text)
    click.echo("")
    if answer.citations:
        click.echo("Citations:")
        for c in answer.citations:
            click.echo(f"  [{c.n}] {c.chunk_id}  {c.title}")
    else:
        click.echo("Citations: (none)")
    click.echo("")
    click.echo("Trace:")
    top1 = "-" if t.top1_score is None else f"{t.top1_score:.3f}"
    rows = [
        ("trace_id", t.trace_id),
        ("mode", f"{t.mode}  (top-1 {top1}; floors {t.floors.get('low')}/{t.floors.get('high')})"),
        ("prompt", f"{t.prompt_version or '-'}  {t.prompt_hash or ''}".rstrip()),
        ("model", t.model),
        ("acl", ",".join(t.user_acl)),
        ("rewrite", f"{t.rewritten_query}  [{t.rewrite.strategy}; {t.rewrite.reason}]"),
        ("retrieved", ", ".join(f"{r.chunk_id} {r.score:.3f}" for r in t.retrieved[:5]) or "-"),
        ("context", ", ".join(t.context_chunk_ids) or "-"),
        (
            "flags",
            f"rejected={t.rejected} uncertain={t.uncertain} invalid_citations={t.invalid_citations} injection={t.injection.action}",
        ),
        ("memory", _memory_line(t.memory)),
        ("tokens", f"in {t.tokens.input} out {t.tokens.output} calls {t.tokens.llm_calls}"),
        ("latency", f"{t.latency_ms:.0f} ms"),
    ]
    for key, value in rows:
        click.echo(f"  {key:<10} {value}")
