"""``rag prompts canary`` and ``rag prompts rollout status``: a staged rollout (seed 004 §4.3).

The plan, the arms and the rules are :mod:`app.generation.registry.rollout`; the file edits
:mod:`app.generation.registry.authoring`; the evidence a stage needs is measured here: the
candidate's answers in the answer log, the A/B verdict (:mod:`app.eval.compare.live`) and a
``rag shadow`` report. Exit codes: 0 done, 1 refused (a stage's time or evidence is missing),
2 bad input.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from app.errors import ConfigError, UserError
from app.generation.registry import PromptRegistry, build_registry, default_root

root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Prompts tree to work on (default: app/generation/prompts).",
)


def _registry(root: Path | None) -> PromptRegistry:
    return build_registry(root or default_root())


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _read_json(path: Path, what: str, limit_name: str) -> Any:
    from app.limits import limit
    from app.safe_io import UnsafeInput, load_json

    try:
        return load_json(path, max_bytes=limit(limit_name), what=f"{what} file")
    except UnsafeInput as exc:
        raise ConfigError(f"{what} {exc}") from None


# -- staged rollout ------------------------------------------------------------------------------


def _now(text: str | None) -> datetime:
    from datetime import UTC

    from app.generation.registry.releases import parse_since

    if text is None:
        return datetime.now(UTC)
    try:
        return parse_since(text)
    except ValueError:
        raise UserError(f"--now {text!r}: not a UTC time like 2026-12-05T07:00:00Z") from None


def _answer_log(path: Path | None) -> Any:
    """The answer log given (an error if unreadable), or the default one if it exists."""
    from app.ops.logs import read_answer_log
    from app.paths import logs_dir

    if path is not None:
        return read_answer_log(path)
    default = logs_dir() / "answers.jsonl"
    return read_answer_log(default) if default.is_file() else None


def _shadow_evidence(report: Path | None, qualified: str) -> tuple[int | None, str | None]:
    """(answers replayed, problem) of a ``rag shadow`` report for the candidate ``qualified``."""
    if report is None:
        return None, None
    data = _read_json(report, "--shadow-report", "report_file_bytes")
    if not isinstance(data, dict) or data.get("kind") != "shadow":
        raise UserError(f"--shadow-report {report}: not a `rag shadow` report (no kind: shadow)")
    prompt = str((data.get("candidate") or {}).get("prompt", ""))
    if prompt != qualified:
        return None, f"{report} replayed {prompt or 'no prompt'}, not the candidate {qualified}"
    summary = data.get("summary") or {}
    if summary.get("errors"):
        return None, f"{report} has {summary['errors']} failed replays; rerun `rag shadow`"
    return int(summary.get("replayed", 0)), None


def _evidence(
    reg: PromptRegistry,
    pid: str,
    log: Any,
    shadow_report: Path | None,
    now: datetime,
    alpha: float,
) -> Any:
    from app.eval.compare.live import stage_evidence

    rel = reg.releases.entries[pid]
    assert rel.rollout is not None
    shadow = _shadow_evidence(shadow_report, f"{pid}_v{rel.rollout.candidate}")
    return stage_evidence(reg.releases, rel, log, now, alpha=alpha, shadow=shadow)


def _plan(reg: PromptRegistry) -> Any:
    from app.generation.registry.rollout import plan_of

    try:
        return plan_of(reg.releases)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


_log_option = click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Answer log with the rollout's traffic (default: logs/answers.jsonl if present).",
)
_now_option = click.option(
    "--now", "now_text", default=None, metavar="UTC", help="The time to judge at (default: now)."
)


@click.command("canary")
@click.argument("name")
@click.argument("version", required=False)
@click.option("--percent", type=float, default=None, help="Go to the stage serving this %.")
@click.option("--promote", is_flag=True, help="Go to the next stage (after the last: active).")
@click.option("--abort", is_flag=True, help="End the rollout: everyone gets the active version.")
@click.option(
    "--shadow-report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The `rag shadow` report of the candidate (evidence for leaving the shadow stage).",
)
@click.option("--alpha", type=float, default=0.05, show_default=True)
@_log_option
@_now_option
@root_option
def canary_cmd(
    name: str,
    version: str | None,
    percent: float | None,
    promote: bool,
    abort: bool,
    shadow_report: Path | None,
    alpha: float,
    log_path: Path | None,
    now_text: str | None,
    root: Path | None,
) -> None:
    """Staged rollout of VERSION of prompt NAME (seed 004 §4.3): start it at the plan's first
    stage, move it on (--promote, --percent) once the stage's time and evidence are in, or
    --abort it. Every step is a one-line edit of releases.toml."""
    from app.generation.registry.authoring import (
        abort_rollout,
        move_rollout,
        promote_candidate,
        start_rollout,
    )
    from app.generation.registry.releases import parse_version
    from app.generation.registry.rollout import KEEP_OLD_DAYS, assess

    if sum([promote, abort, percent is not None]) > 1:
        raise UserError("give one of --promote, --abort, --percent")
    reg = _registry(root)
    now = _now(now_text)
    plan = _plan(reg)
    pid = re.sub(r"_v\d+$", "", name.strip())
    rel = reg.releases.entries.get(pid)
    rollout = rel.rollout if rel is not None else None
    if abort:
        done, old = abort_rollout(reg, pid)
        click.echo(
            f"{pid}: rollout of v{done.rollout.candidate if done.rollout else '?'} aborted; "
            f"everyone gets the active v{done.active}"
        )
        click.echo(f"-{old}")
        return
    if rollout is None:
        wanted = parse_version(version) if version else None
        if wanted is None:
            raise UserError(
                f"{pid}: no rollout under way; start one with `rag prompts canary {pid} vN`"
            )
        if percent is not None and percent != plan[0].percent:
            raise UserError(
                f"{pid}: the plan starts with {plan[0].describe()}; stages are not skipped — "
                f"start without --percent, then move on with --promote"
            )
        _, started, _, new = start_rollout(reg, pid, wanted, now)
        click.echo(
            f"{pid}: v{started.candidate} enters stage {plan[0].describe()}; "
            f"active v{rel.active if rel else '?'} serves everyone else"
        )
        click.echo(f"+{new}")
        if len(plan) > 1:
            click.echo(
                f"next: `rag prompts canary {pid} --promote` when the stage's time and evidence are in"
            )
        return
    if version and parse_version(version) != rollout.candidate:
        raise UserError(
            f"{pid} is rolling out v{rollout.candidate}, not {version}; --abort it first"
        )
    if not promote and percent is None:
        raise UserError(
            f"{pid} is rolling out v{rollout.candidate}: give --promote, --percent or --abort"
        )
    log = _answer_log(log_path)
    evidence = _evidence(reg, pid, log, shadow_report, now, alpha)
    step = assess(plan, rollout, now, evidence)
    target = step.next_stage
    if percent is not None:
        if percent == step.stage.percent:
            click.echo(f"{pid}: already at {percent:g} % (stage {step.stage.name})")
            return
        if target is None or percent != target.percent:
            nxt = f"{target.percent:g} % ({target.name})" if target else "promotion to active"
            raise UserError(f"{pid}: --percent {percent:g} skips stages; the next step is {nxt}")
    if not step.ready:
        click.echo(
            f"{pid}: refused — stage {step.stage.name} of v{rollout.candidate} is not done:",
            err=True,
        )
        for item in step.missing:
            click.echo(f"  - {item}", err=True)
        raise click.exceptions.Exit(1)
    if target is None:
        done, changes = promote_candidate(reg, pid)
        click.echo(f"{pid}: v{rollout.candidate} is active; v{done.active} is the fallback")
        for old, new in changes:
            click.echo(f"-{old}")
            if new:
                click.echo(f"+{new}")
        click.echo(
            f"keep v{done.active} ≥ {KEEP_OLD_DAYS} days; `rag prompts rollback {pid}` switches "
            "back in one line"
        )
        return
    moved, old_line, new_line = move_rollout(reg, pid, target, now)
    click.echo(f"{pid}: v{moved.candidate} moves from {step.stage.name} to {target.describe()}")
    click.echo(f"-{old_line}")
    click.echo(f"+{new_line}")


@click.group("rollout")
def rollout_group() -> None:
    """Where each staged rollout stands (see `rag prompts canary`)."""


@rollout_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--shadow-report", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--alpha", type=float, default=0.05, show_default=True)
@_log_option
@_now_option
@root_option
def rollout_status(
    as_json: bool,
    shadow_report: Path | None,
    alpha: float,
    log_path: Path | None,
    now_text: str | None,
    root: Path | None,
) -> None:
    """Each rollout: stage, share of users, since when, and what the next step needs."""
    from app.generation.registry.rollout import assess

    reg = _registry(root)
    now = _now(now_text)
    plan = _plan(reg)
    log = _answer_log(log_path)
    rows: list[dict[str, Any]] = []
    for pid, rel in sorted(reg.releases.entries.items()):
        rollout = rel.rollout
        if rollout is None:
            continue
        evidence = _evidence(reg, pid, log, shadow_report, now, alpha)
        step = assess(plan, rollout, now, evidence)
        nxt = step.next_stage
        rows.append(
            {
                "prompt": pid,
                "active": f"v{rel.active}",
                "fallback": f"v{rel.fallback}",
                "candidate": f"v{rollout.candidate}",
                "stage": rollout.stage,
                "stage_number": step.index + 1,
                "stages": len(plan),
                "percent": rollout.percent,
                "since": rollout.since,
                "elapsed_minutes": round(step.elapsed.total_seconds() / 60, 1),
                "next": nxt.name if nxt else "active",
                "ready": step.ready,
                "missing": list(step.missing),
                "candidate_answers": evidence.answers,
            }
        )
    if as_json:
        _echo_json({"plan": [p.describe() for p in plan], "rollouts": rows})
        return
    click.echo("plan: " + " → ".join(p.describe() for p in plan))
    if not rows:
        click.echo("no rollout under way")
    for r in rows:
        click.echo(
            f"{r['prompt']}: v{r['candidate'][1:]} at {r['percent']:g} % — stage {r['stage']} "
            f"({r['stage_number']}/{r['stages']}) since {r['since']} ({r['elapsed_minutes']:g} min); "
            f"active {r['active']}, fallback {r['fallback']}"
        )
        step_name = f"{r['next']} (`rag prompts canary {r['prompt']} --promote`)"
        if r["ready"]:
            click.echo(f"  ready for {step_name}")
        else:
            click.echo(f"  before {step_name}:")
            for item in r["missing"]:
                click.echo(f"    - {item}")
