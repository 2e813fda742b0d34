"""``rag shadow ANSWER_LOG --prompt system/kb_qa_v3 [--model …]``: shadow replay.

Replays the logged questions (with their ACL and history) through a candidate prompt/model
and compares with the logged answers; see :mod:`app.ops.shadow`. Writes a JSON report under
``reports/shadow/`` and prints the summary table. Exit 0 when the replay ran (the comparison
is information, not a gate), 1 when any replay call failed, 2 on bad input.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from app.cli import options


@click.command("shadow")
@click.argument("answer_log", type=click.Path(path_type=Path))
@click.option("--prompt", "qa_prompt", required=True, help="Candidate QA prompt id or version.")
@click.option(
    "--model",
    default=None,
    type=options.PROVIDER,
    help="Candidate model (default: the model each answer was logged with).",
)
@click.option("--kb", "kb_path", type=click.Path(path_type=Path), default=None)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Replay the first N.")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def cli(
    answer_log: Path,
    qa_prompt: str,
    model: str | None,
    kb_path: Path | None,
    limit: int | None,
    concurrency: int,
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """Replay ANSWER_LOG's questions through a candidate prompt (and model) and compare with
    the logged answers: changed, newly refused, citations changed, tokens and latency."""
    from app.errors import UserError
    from app.generation.pipeline.config import PipelineConfig
    from app.generation.pipeline.generator import Pipeline
    from app.llm.engine import Engine, EngineConfig
    from app.llm.providers.families import parse_model
    from app.ops.logs import read_answer_log
    from app.ops.shadow import markdown, replay, write_report
    from app.paths import reports_dir

    log = read_answer_log(answer_log)
    models = sorted({a.model for a in log.answers})
    if model is None and len(models) > 1:
        raise UserError(
            f"{answer_log}: answers were logged with {len(models)} models ({', '.join(models)}) — "
            "choose the candidate with --model"
        )
    chosen = model or models[0]
    config = PipelineConfig(model=chosen, qa_prompt=qa_prompt, kb_path=kb_path, log_answers=False)

    async def run() -> Any:
        engine = Engine(EngineConfig(concurrency=concurrency))
        try:
            pipe = Pipeline(config, engine)
            return await replay(
                log,
                pipe,
                candidate={
                    "prompt": qa_prompt,
                    "model": chosen,
                    "offline": parse_model(chosen).offline,
                },
                concurrency=concurrency,
                limit=limit,
            )
        finally:
            await engine.aclose()

    report = asyncio.run(run())
    path = write_report(report, out_dir or reports_dir() / "shadow")
    summary = report.summary()
    if as_json:
        click.echo(json.dumps({"report": str(path), **summary}, ensure_ascii=False, indent=2))
    else:
        click.echo(markdown(report), nl=False)
        click.echo(f"\nreport: {path}")
    if summary["errors"]:
        raise SystemExit(1)
