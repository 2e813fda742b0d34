"""``rag ops``: operations on live traffic. ``rag ops ab`` judges a rollout's arms.

Exit codes: 0 no arm flagged ❌, 1 the candidate is significantly worse on a quality metric
(👎 rate, citation validity), 2 bad input.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from app.errors import UserError


@click.group()
def cli() -> None:
    """Operations on live traffic: judge a staged rollout's arms (ab)."""


def _when(text: str | None, flag: str) -> datetime | None:
    from app.generation.registry.releases import parse_since

    if text is None:
        return None
    try:
        return parse_since(text)
    except ValueError:
        raise UserError(f"{flag} {text!r}: not a UTC time like 2026-12-05T07:00:00Z") from None


@cli.command("ab")
@click.argument("answer_log", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--prompt", "prompt_id", required=True, help="The prompt under rollout, e.g. system/kb_qa."
)
@click.option("--since", default=None, metavar="UTC", help="Window start (default: first answer).")
@click.option("--until", default=None, metavar="UTC", help="Window end (default: last answer).")
@click.option("--candidate", default=None, help="The candidate version, e.g. system/kb_qa_v3.")
@click.option("--alpha", type=float, default=0.05, show_default=True)
@click.option("--trend", is_flag=True, help="Also print the hourly looks (👎 rate per arm).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def ab(
    answer_log: Path,
    prompt_id: str,
    since: str | None,
    until: str | None,
    candidate: str | None,
    alpha: float,
    trend: bool,
    as_json: bool,
) -> None:
    """Compare the arms of PROMPT's rollout in ANSWER_LOG (answers + 👍/👎 feedback): 👎 rate,
    refusal rate, citation validity, latency, cost — per user, paired where users overlap,
    with always-valid intervals (mixture SPRT) that hold however often you look."""
    from app.eval.compare.live import compare_arms, markdown
    from app.ops.logs import read_answer_log

    log = read_answer_log(answer_log)
    cmp = compare_arms(
        log,
        prompt_id,
        since=_when(since, "--since"),
        until=_when(until, "--until"),
        alpha=alpha,
        candidate=candidate,
    )
    if as_json:
        click.echo(json.dumps(cmp.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(markdown(cmp, trend=trend), nl=False)
    if cmp.regressions:
        raise click.exceptions.Exit(1)
