"""``rag eval run`` takes its options from one typed value (:class:`EvalRunOptions`), built
once by the click layer, instead of a callback with one parameter per option."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import click
import pytest

from app.cli.eval import EvalRunOptions, eval_run_options, run_cmd
from app.eval.config import RunConfig


class _Recording(dict[str, Any]):
    """The parameter values, noting which ones were read."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def _params(*args: str) -> _Recording:
    """The parameter values click makes of ``rag eval run ARGS`` (defaults filled in)."""
    with run_cmd.make_context("run", list(args)) as ctx:
        return _Recording(dict(ctx.params))


def test_the_callback_takes_one_typed_value() -> None:
    assert run_cmd.callback is not None
    names = list(inspect.signature(inspect.unwrap(run_cmd.callback)).parameters)
    assert names == ["ctx", "run"]


def test_every_option_reaches_the_typed_value() -> None:
    params = _params("--suite", "smoke", "--judge", "none", "-k", "7")
    run = eval_run_options(params)
    assert isinstance(run, EvalRunOptions) and isinstance(run.config, RunConfig)
    # an option the callback never reads would be silently dropped
    assert params.read == set(params)
    assert (run.config.suite, run.config.k, run.config.judge) == ("smoke", 7, None)
    assert run.config.model == "offline:extractive" and run.config.gate == "thresholds"


def test_a_dataset_file_names_its_suite(tmp_path: Path) -> None:
    data = tmp_path / "hard_v1.2.jsonl"
    data.write_text("", encoding="utf-8")
    run = eval_run_options(_params("--dataset", str(data)))
    assert run.config.suite == "hard"
    assert run.config.dataset_path == str(data.resolve())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give --suite S or --dataset FILE for a new run, or --resume RUN_ID"),
        (("--suite", "smoke", "--dataset", "x.jsonl"), "not both"),
        (("--dataset", "x.jsonl", "--dataset-version", "1.0"), "not with --dataset"),
    ],
)
def test_options_that_do_not_go_together(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(click.UsageError, match=message):
        eval_run_options(_params(*args))


def test_the_model_strings_are_parsed_at_the_edge() -> None:
    run = eval_run_options(_params("--suite", "smoke", "--judge", "local:smollm2"))
    assert run.config.judge_ref is not None and run.config.judge_ref.family == "local"
    assert run.config.model_ref.offline
    # a bare model id names no provider: refused when the option is parsed (a usage error,
    # exit 2), before the run prints its id
    with pytest.raises(click.BadParameter, match=r"unknown provider 'gpt-4o'.*local \("):
        _params("--suite", "smoke", "--model", "gpt-4o")
    with pytest.raises(click.BadParameter, match="anthropic family takes no base_url"):
        _params("--suite", "smoke", "--judge", "anthropic:claude-opus-4-7@http://127.0.0.1:9")
    assert eval_run_options(_params("--suite", "smoke", "--judge", "None")).config.judge is None
