"""Every command or option a message suggests exists.

Before: ``rag eval diff-prompt``'s own error message (the judge check it shares with
``rag eval run``) recommended ``--allow-weak-judge``, which diff-prompt then rejected with
``No such option``. This test reads every string in app/ (messages, help texts and
docstrings alike) and checks against the click tree of ``rag``:

1. each ``rag <command> …`` names a command, and each option after it is that command's;
2. each bare ``--option`` in a message (an exception, an echo/print/log/warning call, a help
   text) is an option of some ``rag`` command, or follows the program it belongs to (pip,
   npm, git, make, ``scripts/<name>.py``, which must declare it);
3. a bare ``--option`` in a message of the run machinery (which ``rag eval run`` and
   ``rag eval diff-prompt`` both drive) is an option of both, unless :data:`RUN_ONLY` says
   why diff-prompt cannot reach that message.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from app.cli import cli as rag

ROOT = Path(__file__).resolve().parents[3]
APP = ROOT / "app"

OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
PROGRAM = re.compile(
    r"(?<![\w/.-])rag(?= )|scripts/\w+\.py|python -m [\w.]+|\b(?:pip|npm|git|gh|make|pytest)\b"
)
EXTERNAL = ("pip", "npm", "git", "gh", "make", "pytest", "python -m")
MESSAGE_CALLS = {
    "echo", "secho", "print", "append", "warning", "warn", "info", "error", "exception",
    "debug", "fail", "UsageError", "BadParameter",
}  # fmt: skip
# the packages `rag eval run` and `rag eval diff-prompt` both drive …
RUN_MACHINERY = (
    "app/eval/run/", "app/eval/scoring/", "app/eval/datasets/", "app/eval/config.py",
    "app/llm/", "app/generation/", "app/retrieval/", "app/baselines/",
)  # fmt: skip
# … but for these modules, which serve other commands
NOT_RUN = {
    "app/eval/datasets/changes.py": "rag datasets check --changed-since",
    "app/eval/datasets/versions.py": "rag datasets new-version",
    "app/eval/scoring/calibrate.py": "rag judge calibrate",
    "app/generation/registry/__init__.py": "rag prompts check --root",
    "app/generation/registry/review.py": "rag prompts review",
    "app/generation/registry/authoring.py": "rag prompts new / lock / rollback / prune / canary",
    "app/generation/registry/rollout.py": "rag prompts canary, rag prompts rollout status",
}
# words after "rag" in prose, not a command ("the rag process has been writing …")
PROSE = {"process"}
# (file, option) -> why `rag eval diff-prompt` cannot reach the message naming the option
RUN_ONLY = {
    ("app/eval/run/observe.py", "--prompt"): "two --prompt values conflicting, or a prompt "
    "with no pipeline slot: diff-prompt's NAME is checked against the same contracts, and "
    "the message names the prompt it was given",
    ("app/eval/run/runner.py", "--batch"): "diff-prompt has no --batch",
    ("app/eval/run/runner.py", "--resume"): "with --batch only",
    ("app/eval/run/checkpoint.py", "--resume"): "a resumed run's checkpoint",
}


def _strings(node: ast.AST) -> Iterator[tuple[str, int]]:
    """Every string literal under ``node``; an f-string with ``{}`` for its fields."""
    inner: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr):
            inner.update(id(v) for v in sub.values)
            text = "".join(
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                for v in sub.values
            )
            yield text, sub.lineno
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in inner:
            yield sub.value, sub.lineno


def _messages(tree: ast.AST) -> list[tuple[str, int]]:
    return sorted(set(_message_parts(tree)))


def _message_parts(tree: ast.AST) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, ast.Raise) and node.exc is not None:
            parts.append(node.exc)
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in MESSAGE_CALLS or name.endswith(("Error", "Failure")):
                parts.extend(node.args)
            parts.extend(k.value for k in node.keywords if k.arg == "help")
        for part in parts:
            yield from _strings(part)


def _sources() -> list[tuple[str, ast.AST]]:
    return [
        (path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(APP.rglob("*.py"))
    ]


def _sub(command: click.Command, name: str) -> click.Command | None:
    if not isinstance(command, click.Group):
        return None
    return command.get_command(click.Context(command), name)


def _options(command: click.Command) -> set[str]:
    """The declared options and the help names every command inherits from the root group
    (not get_params(): click caches a command's help option with the help names of the first
    context that asked, so the answer would depend on which test ran before)."""
    declared = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    return declared | set(rag.context_settings.get("help_option_names", ["--help"]))


def _every_command(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[click.Command]:
    yield command
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            found = _sub(command, name)
            assert found is not None, (*path, name)
            yield from _every_command(found, (*path, name))


SOURCES = _sources()
ALL_OPTIONS = {o for c in _every_command(rag) for o in _options(c)}


def _command_of(text: str) -> tuple[click.Command, list[str], str]:
    """The command a ``rag …`` suggestion names, its path, and the rest of the suggestion
    (up to the end of the sentence or clause)."""
    text = re.split(r"[;`\n]| \(| — |\. ", text)[0]
    words = [w.rstrip(":,.)") for w in text.split()]
    command: click.Command = rag
    path: list[str] = []
    for word in words:
        # `rag eval compare/diff-prompt`: each of the alternatives
        found = [_sub(command, w) for w in word.split("/")]
        if not found or None in found:
            break
        command, path = found[-1], [*path, word]  # type: ignore[assignment]
    return command, path, " ".join(words[len(path) :])


def test_every_rag_command_a_string_suggests_exists() -> None:
    problems: list[str] = []
    seen = 0
    for rel, tree in SOURCES:
        for text, line in _strings(tree):
            for found in re.finditer(r"(?<![\w/.-])rag ([^\n`]+)", text):
                if found.group(1).split()[0] in PROSE:
                    continue
                seen += 1
                command, path, rest = _command_of(found.group(1))
                where = f"{rel}:{line}: `rag {found.group(1)[:60]}`"
                if isinstance(command, click.Group) and re.match(r"[a-z][a-z0-9-]*\b", rest):
                    problems.append(f"{where}: no command {rest.split()[0]!r} under rag {path}")
                    continue
                for option in OPTION.findall(rest):
                    if option not in _options(command):
                        problems.append(f"{where}: rag {' '.join(path)} has no {option}")
    assert seen > 100  # the scan found the suggestions (app/ has ~200)
    assert not problems, "\n".join(problems)


def _program(text: str, at: int) -> str | None:
    """The program whose option the one at ``at`` is: the last one named before it in the
    same clause, or the script a message's ``name:`` prefix names (check_approvals: …)."""
    clause = re.split(r"; |, or | — |\(|\. ", text[:at])[-1]
    before = [p.group(0) for p in PROGRAM.finditer(clause)]
    if before:
        return before[-1]
    prefix = re.match(r"(\w+): ", text)
    if prefix and (ROOT / "scripts" / f"{prefix.group(1)}.py").is_file():
        return f"scripts/{prefix.group(1)}.py"
    return None


def test_every_option_a_message_suggests_exists() -> None:
    problems: list[str] = []
    for rel, tree in SOURCES:
        source = (ROOT / rel).read_text(encoding="utf-8")
        for text, line in _messages(tree):
            for found in OPTION.finditer(text):
                option, program = found.group(0), _program(text, found.start())
                if f'add_argument("{option}"' in source:
                    continue  # the module's own argparse front end (python -m …, a script)
                where = f"{rel}:{line}: {option} in {text[:80]!r}"
                if program is not None and program.startswith(EXTERNAL):
                    continue  # another program's option (pip install -e, npm ci --prefix)
                if program is not None and program.startswith("scripts/"):
                    script = (ROOT / program).read_text(encoding="utf-8")
                    if f'"{option}"' not in script:
                        problems.append(f"{where}: {program} declares no {option}")
                    continue
                if option not in ALL_OPTIONS:
                    problems.append(f"{where}: no rag command has {option}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("command", ["run", "diff-prompt"])
def test_a_run_s_messages_suggest_only_options_of_every_command_that_runs(command: str) -> None:
    eval_group = _sub(rag, "eval")
    assert eval_group is not None
    target = _sub(eval_group, command)
    assert target is not None
    options = _options(target)
    used: set[tuple[str, str]] = set()
    problems: list[str] = []
    for rel, tree in SOURCES:
        if not rel.startswith(RUN_MACHINERY) or rel in NOT_RUN:
            continue
        for text, line in _messages(tree):
            for found in OPTION.finditer(text):
                option = found.group(0)
                if _program(text, found.start()) is not None or option in options:
                    continue
                if command == "diff-prompt" and (rel, option) in RUN_ONLY:
                    used.add((rel, option))
                    continue
                problems.append(f"{rel}:{line}: rag eval {command} has no {option}: {text[:90]!r}")
    assert not problems, "\n".join(problems)
    if command == "diff-prompt":
        assert used == set(RUN_ONLY), f"stale RUN_ONLY entries: {set(RUN_ONLY) - used}"
