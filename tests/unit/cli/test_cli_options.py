"""Options several commands share are declared once (app/cli/options.py): each command's
`--help` works and shows the one help text, the definitions agree in every command, and
declaring them costs `rag --help` no import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

import click
import pytest
from click.testing import CliRunner

from app.cli import cli as rag
from app.cli import options
from app.eval.config import DEFAULT_MODEL

COMMANDS = [("ask",), ("eval", "run"), ("eval", "merge"), ("kb", "chunks")]
SHARED = {
    "--retriever": [("ask",), ("eval", "run")],
    "--embedder": [("ask",), ("eval", "run")],
    "--kb": [("ask",), ("eval", "run"), ("kb", "chunks")],
    "--out": [("eval", "run"), ("eval", "merge")],
    "--gate": [("eval", "run"), ("eval", "merge")],
    "--model": [("ask",), ("eval", "run")],
    "--timeout": [("ask",), ("eval", "run")],
    "--max-attempts": [("ask",), ("eval", "run")],
    "--allow-unlisted-model": [("ask",), ("eval", "run")],
}


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = rag
    ctx = click.Context(rag)
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(ctx, name)
        assert found is not None, path
        command = found
    return command


def _option(path: tuple[str, ...], flag: str) -> click.Option:
    [option] = [p for p in _command(path).params if isinstance(p, click.Option) and flag in p.opts]
    return option


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_each_command_s_help_works(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(rag, [*path, "--help"])
    assert result.exit_code == 0, result.output
    for flag, users in SHARED.items():
        assert (flag in result.output) == (path in users), (path, flag)


@pytest.mark.parametrize("flag", sorted(SHARED))
def test_a_shared_option_is_the_same_in_every_command(flag: str) -> None:
    first, *others = (_option(path, flag) for path in SHARED[flag])
    for other in others:
        assert other.name == first.name
        assert other.help == first.help and first.help
        assert other.default == first.default
        assert repr(other.type) == repr(first.type)
        assert other.show_default == first.show_default and other.is_flag == first.is_flag


def test_the_choices_and_defaults_are_the_runner_s() -> None:
    from app.eval.config import RunConfig

    fields = RunConfig.model_fields
    assert _option(("eval", "run"), "--model").default == DEFAULT_MODEL == options.DEFAULT_MODEL
    retriever = _option(("ask",), "--retriever")
    assert isinstance(retriever.type, click.Choice)
    assert retriever.default == fields["retriever"].default
    assert set(retriever.type.choices) == set(get_args(fields["retriever"].annotation))
    assert _option(("eval", "run"), "--timeout").default == fields["timeout_s"].default
    assert _option(("eval", "run"), "--max-attempts").default == fields["max_attempts"].default
    gate = _option(("eval", "run"), "--gate")
    assert isinstance(gate.type, click.Choice)
    assert set(gate.type.choices) == set(get_args(fields["gate"].annotation))


def test_kb_refuses_a_file_in_every_command(tmp_path: Path) -> None:
    a_file = tmp_path / "kb.md"
    a_file.write_text("# not a folder\n", encoding="utf-8")
    for argv in (["ask", "年假", "--kb", str(a_file)], ["kb", "chunks", "--kb", str(a_file)]):
        result = CliRunner().invoke(rag, argv)
        assert result.exit_code == 2, result.output
        assert "is a file" in result.output


def test_declaring_the_options_imports_nothing_but_click() -> None:
    code = (
        "import sys; before = set(sys.modules); import app.cli.options; "
        "import json; print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    new = set(json.loads(out))
    outside = {m.split(".")[0] for m in new} - set(sys.stdlib_module_names)
    assert outside <= {"app", "click"}, sorted(outside)
    assert {m for m in new if m.startswith("app.") and not m.startswith("app.cli")} <= {
        "app.errors",
        "app.redact",
        "app.wellformed",  # redact's text rule (lone surrogates): stdlib only, on the ground floor
    }, sorted(new)
