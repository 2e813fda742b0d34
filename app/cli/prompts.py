"""``rag prompts``: list, show, render, check, new, rollback, lock, prune, test (+ review,
canary, rollout: :mod:`app.cli.prompts_rollout`).

Exit codes: 0 ok, 1 a check failed, 2 bad input (a :class:`~app.errors.UserError`).
Every command takes ``--root DIR`` to work on another prompts tree.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from app.cli import options
from app.errors import ConfigError, PromptError, UserError
from app.generation.registry import PromptRegistry, PromptSpec, build_registry, default_root
from app.llm.spec import ModelRef
from app.llm.types import coerce_history

F = TypeVar("F", bound=Callable[..., Any])

# lazily imported sub-commands written elsewhere: name -> module defining `cli`
# ("module:attr" for another name than `cli`)
_LAZY: dict[str, tuple[str, str]] = {
    "review": ("app.cli.prompts_review", "Review a prompt change (diff, checks, metric deltas)."),
    "canary": (
        "app.cli.prompts_rollout:canary_cmd",
        "Staged rollout of a version (seed 004 §4.3).",
    ),
    "rollout": ("app.cli.prompts_rollout:rollout_group", "Where each staged rollout stands."),
}


class PromptsGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [
            n
            for n, (mod, _) in _LAZY.items()
            if importlib.util.find_spec(mod.partition(":")[0]) is not None
        ]
        return sorted([*super().list_commands(ctx), *lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY:
            module_name, _, attr = _LAZY[cmd_name][0].partition(":")
            if importlib.util.find_spec(module_name) is None:
                return None
            command = getattr(importlib.import_module(module_name), attr or "cli", None)
            return command if isinstance(command, click.Command) else None
        return super().get_command(ctx, cmd_name)


def root_option(func: F) -> F:
    return click.option(
        "--root",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Prompts tree to work on (default: app/generation/prompts).",
    )(func)


def _registry(root: Path | None) -> PromptRegistry:
    return build_registry(root or default_root())


def _exit(code: int) -> None:
    if code:
        raise click.exceptions.Exit(code)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


@click.group(cls=PromptsGroup)
def cli() -> None:
    """Versioned prompt modules: list, show, render, check, new, rollback, lock, prune, test."""


@cli.command("list")
@root_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(root: Path | None, as_json: bool) -> None:
    """Every prompt with its versions (* = active, f = fallback), models and purpose."""
    reg = _registry(root)
    rows: list[dict[str, Any]] = []
    for pid in reg.prompt_ids():
        versions = reg.versions(pid)
        active = reg.active_version(pid)
        rel = reg.release(pid)
        fallback = rel.fallback if rel else None
        spec = versions[active]
        rows.append(
            {
                "id": pid,
                "active": f"v{active}",
                "fallback": f"v{fallback}" if fallback else None,
                "versions": [f"v{v}" for v in versions],
                "models": list(spec.applicable_models),
                "purpose": spec.header.purpose,
            }
        )
    if as_json:
        _echo_json(rows)
        return
    width = max((len(r["id"]) for r in rows), default=10)
    for r in rows:
        marks = " ".join(
            v + ("*" if v == r["active"] else "") + ("f" if v == r["fallback"] else "")
            for v in r["versions"]
        )
        click.echo(f"{r['id']:<{width}}  {marks:<10}  {', '.join(r['models'])}")
        click.echo(f"{'':<{width}}  {r['purpose'] or ''}")


@cli.command()
@click.argument("name")
@root_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(name: str, root: Path | None, as_json: bool) -> None:
    """Header, templates, variables and fixtures of a prompt (active version unless _vN)."""
    spec = _registry(root).get(name)
    data = _spec_dict(spec)
    if as_json:
        _echo_json(data)
        return
    click.echo(f"# {spec.qualified}  {spec.content_hash}")
    for key, value in spec.header.to_dict().items():
        if isinstance(value, list):
            click.echo(f"{key}:")
            for item in value:
                click.echo(f"  - {json.dumps(item, ensure_ascii=False)}")
        else:
            click.echo(
                f"{key}: {value if not isinstance(value, dict) else json.dumps(value, ensure_ascii=False)}"
            )
    click.echo(f"variables: {', '.join(sorted(spec.variables))}")
    if spec.defaults:
        click.echo(f"defaults: {json.dumps(dict(spec.defaults), ensure_ascii=False)}")
    if spec.rejection_trigger_keywords:
        click.echo(f"rejection trigger keywords: {list(spec.rejection_trigger_keywords)}")
        click.echo(f"rejection answer: {spec.rejection_answer}")
    click.echo("\n--- SYSTEM_PROMPT ---")
    click.echo(spec.system_prompt if spec.system_prompt is not None else "(none)")
    click.echo("\n--- USER_TEMPLATE ---")
    click.echo(spec.user_template)
    click.echo("\n--- TEST_FIXTURES ---")
    for i, fx in enumerate(spec.test_fixtures, start=1):
        click.echo(f"{i}. {json.dumps(dict(fx), ensure_ascii=False)}")


def _spec_dict(spec: PromptSpec) -> dict[str, Any]:
    return {
        "id": spec.prompt_id,
        "qualified": spec.qualified,
        "hash": spec.content_hash,
        "header": spec.header.to_dict(),
        "applicable_models": list(spec.applicable_models),
        "variables": sorted(spec.variables),
        "defaults": dict(spec.defaults),
        "system_prompt": spec.system_prompt,
        "user_template": spec.user_template,
        "test_fixtures": [dict(f) for f in spec.test_fixtures],
        "rejection_trigger_keywords": list(spec.rejection_trigger_keywords),
        "rejection_answer": spec.rejection_answer,
        "canary": spec.canary,
        "response_format": spec.response_format,
    }


def _read_json(path: Path, what: str, limit_name: str) -> Any:
    """A JSON file named on the command line, read through :mod:`app.safe_io`."""
    from app.limits import limit
    from app.safe_io import UnsafeInput, load_json

    try:
        return load_json(path, max_bytes=limit(limit_name), what=f"{what} file")
    except UnsafeInput as exc:
        raise ConfigError(f"{what} {exc}") from None


@cli.command("render")
@click.argument("name")
@click.option(
    "--model", "-m", required=True, type=options.MODEL_OR_ID, help="Model id or provider string."
)
@click.option(
    "--var",
    "var_items",
    multiple=True,
    metavar="K=V",
    help="A template variable (\\n in V becomes a newline).",
)
@click.option(
    "--vars-file", type=click.Path(dir_okay=False, path_type=Path), help="JSON object of variables."
)
@click.option(
    "--history",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON list of {role, content}.",
)
@click.option(
    "--format",
    "chat_format",
    type=click.Choice(["auto", "anthropic", "openai", "llama2", "text"]),
    default="auto",
    show_default=True,
)
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=1), default=2048, show_default=True)
@options.allow_unlisted_model
@root_option
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON; 'request' is the exact body sent."
)
def render_cmd(
    name: str,
    model: str,
    var_items: tuple[str, ...],
    vars_file: Path | None,
    history: Path | None,
    chat_format: str,
    temperature: float,
    max_tokens: int,
    allow_unlisted_model: bool,
    root: Path | None,
    as_json: bool,
) -> None:
    """Print the assembled request exactly as it would be sent (--json: the provider's
    wire body, built by the same encoder the provider sends; never a key or header)."""
    variables: dict[str, Any] = {}
    if vars_file is not None:
        data = _read_json(vars_file, "--vars-file", "vars_file_bytes")
        if not isinstance(data, dict):
            raise ConfigError(f"--vars-file {vars_file}: expected a JSON object")
        variables.update(data)
    for item in var_items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--var {item!r}: expected KEY=VALUE")
        variables[key] = value.replace("\\n", "\n")
    turns = _read_json(history, "--history", "history_file_bytes") if history is not None else []
    if not isinstance(turns, list):
        raise ConfigError(f"--history {history}: expected a JSON list of {{role, content}}")
    messages = coerce_history(turns, source=f"--history {history}")
    rp = _registry(root).render(
        name,
        model=model,
        variables=variables,
        history=messages,
        chat_format=chat_format,
        allow_unlisted=allow_unlisted_model,
    )
    request = rp.to_request(temperature=temperature, max_tokens=max_tokens)
    if as_json:
        from app.llm.providers import request_payload

        provider = rp.provider
        _echo_json(
            {
                "prompt_version": rp.qualified_version,
                "prompt_hash": rp.content_hash,
                "chat_format": rp.chat_format,
                "model": rp.model,
                # the provider whose encoder built "request"; inferred for a bare model id
                "provider": str(provider),
                "provider_inferred": rp.ref is None or rp.ref.provider is None,
                "prompt_text": rp.prompt_text,
                # exactly the body that provider sends (default sampling; no key, no headers)
                "request": request_payload(provider, request),
            }
        )
        return
    click.echo(
        f"# {rp.qualified_version}  {rp.content_hash}  format={rp.chat_format}  model={rp.model}"
    )
    if rp.prompt_text is not None:
        click.echo(rp.prompt_text)
        return
    if rp.system is not None:
        cache = " (cache_control: ephemeral)" if rp.chat_format == "anthropic" else ""
        click.echo(f"--- system{cache} ---")
        click.echo(rp.system)
    for m in rp.messages:
        click.echo(f"--- {m.role} ---")
        click.echo(m.content)


@cli.command()
@root_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--changed-since", "rev", metavar="REV", help="Also check the change since a git revision."
)
def check(root: Path | None, as_json: bool, rev: str | None) -> None:
    """Every violation in the tree, never only the first. Exit 1 when there are any."""
    reg = _registry(root)
    from app.eval.report.baseline import check_header_baselines

    violations = [*reg.check(changed_since=rev), *check_header_baselines(reg)]
    if as_json:
        _echo_json(
            {
                "ok": not violations,
                "root": str(reg.root),
                "modules": len(reg.modules),
                "violations": [v.to_dict() for v in violations],
            }
        )
    else:
        for v in violations:
            click.echo(v.format())
        files = len({v.file for v in violations})
        verdict = "ok" if not violations else f"{len(violations)} violation(s) in {files} file(s)"
        click.echo(f"checked {len(reg.modules)} prompt modules under {reg.root}: {verdict}")
    _exit(1 if violations else 0)


@cli.command()
@click.argument("name")
@root_option
@click.option("--author", help="Name for the header (default: the login name).")
def new(name: str, root: Path | None, author: str | None) -> None:
    """Write <slug>_v<N+1>.py from the latest version (the old file stays byte-identical)."""
    from app.generation.registry.authoring import new_version

    reg = _registry(root)
    path = new_version(reg, name, author=author)
    rel = path.relative_to(reg.root).as_posix()
    click.echo(
        f"wrote {rel} (from the latest version; edit it, replace the TODO change summary, "
        "then `rag prompts check`)"
    )
    click.echo(
        "it is not released: set active in releases.toml and run `rag prompts lock` to ship it"
    )


@cli.command()
@click.argument("name")
@root_option
def rollback(name: str, root: Path | None) -> None:
    """Make the fallback version active in releases.toml (a one-line diff)."""
    from app.generation.registry.authoring import rollback as do_rollback

    reg = _registry(root)
    pid, old, new_v, old_line, new_line = do_rollback(reg, name)
    click.echo(f"{pid}: active v{old} -> v{new_v} (the fallback) in releases.toml")
    click.echo(f"-{old_line}")
    click.echo(f"+{new_line}")
    click.echo(
        f"one line changed; for an immediate override without a deploy: RAG_PROMPT_PIN={pid}=v{new_v}"
    )
    rollout = reg.releases.entries[pid].rollout if pid in reg.releases.entries else None
    if rollout is not None:
        click.echo(
            f"note: the rollout of v{rollout.candidate} goes on (its {rollout.percent:g} % of "
            f"users still get v{rollout.candidate}); end it with `rag prompts canary {pid} --abort`"
        )


@cli.command("lock")
@click.argument("versions", nargs=-1)
@root_option
def lock_cmd(versions: tuple[str, ...], root: Path | None) -> None:
    """Record the content hash of every released version in prompts.lock (and of VERSIONS
    named, e.g. system/kb_qa_v3: a candidate to roll out with `rag prompts canary`)."""
    from app.generation.registry.authoring import lock

    hashes, changed = lock(_registry(root), versions)
    click.echo(f"prompts.lock: {len(hashes)} released versions locked")
    for qid in changed:
        click.echo(f"  locked {qid}  {hashes[qid]}")


@cli.command("prune")
@root_option
@click.option("--dry-run", is_flag=True, help="Only list; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--today",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="Reference date for the 30-day rule (default: today).",
)
def prune_cmd(root: Path | None, dry_run: bool, as_json: bool, today: datetime | None) -> None:
    """Old versions seed 004 §4.4 allows deleting, and why each other one must stay."""
    from app.generation.registry.authoring import prune

    reg = _registry(root)
    decisions = prune(reg, today=today.date() if today else None)
    if as_json:
        _echo_json(
            [
                {"version": d.qualified, "deletable": d.deletable, "reasons": list(d.reasons)}
                for d in decisions
            ]
        )
    else:
        if not decisions:
            click.echo("no superseded versions")
        for d in decisions:
            if d.deletable:
                click.echo(f"deletable  {d.qualified}")
            else:
                click.echo(f"keep       {d.qualified}: {'; '.join(d.reasons)}")
    if not dry_run:
        for d in decisions:
            if d.deletable:
                cat, _, stem = d.qualified.partition("/")
                (reg.root / cat / f"{stem}.py").unlink()
                click.echo(f"deleted {d.qualified}")


@cli.command("test")
@click.argument("name")
@click.option(
    "--model",
    "-m",
    required=True,
    type=options.PROVIDER,
    help="Provider string, e.g. anthropic:claude-sonnet-4-6.",
)
@root_option
def test_cmd(name: str, model: str, root: Path | None) -> None:
    """Send every fixture to a live model and check its expected_phrases. Exit 1 on a miss."""
    from app.generation.registry.loader import fixture_variables

    spec = _registry(root).get(name)
    try:
        engine_mod = importlib.import_module("app.llm.engine")
        engine_cls = engine_mod.Engine
        config_cls = engine_mod.EngineConfig
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"no provider configured/available: cannot load app.llm.engine ({exc}); "
            "`rag prompts test` needs the provider engine"
        ) from exc
    from app.llm.providers.families import parse_model

    ref = parse_model(model)  # the CLI edge (options.PROVIDER checked it already)
    rendered = [
        _render_fixture(spec, fx, ref, fixture_variables(spec, fx)) for fx in spec.test_fixtures
    ]

    async def run() -> list[str]:
        engine = engine_cls(config_cls(concurrency=4, cache=False))
        try:
            out = []
            for rp in rendered:
                completion = await engine.generate(
                    ref, rp.to_request(temperature=0.0), sample_index=0
                )
                out.append(str(completion.text))
            return out
        finally:
            await engine.aclose()

    import asyncio

    answers = asyncio.run(run())
    failures = 0
    for i, (fx, answer) in enumerate(zip(spec.test_fixtures, answers, strict=True), start=1):
        missing = [p for p in fx.get("expected_phrases", []) if p not in answer]
        failures += bool(missing)
        status = "PASS" if not missing else f"FAIL missing {missing}"
        click.echo(f"{spec.qualified} fixture {i}: {status}")
        if missing:
            click.echo(f"    answer: {answer[:300]!r}")
    click.echo(f"{len(answers) - failures}/{len(answers)} fixtures passed on {model}")
    _exit(1 if failures else 0)


def _render_fixture(spec: PromptSpec, fx: Any, model: ModelRef, variables: dict[str, Any]) -> Any:
    from app.generation.registry.render import render_spec

    try:
        return render_spec(spec, model=model, variables=variables)
    except PromptError as exc:
        raise UserError(f"{spec.qualified}: a fixture does not render: {exc}") from exc
