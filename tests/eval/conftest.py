"""The pytest front end of the evaluation harness (seed 004 §12.1).

``pytest tests/eval -m smoke|full|hard|adversarial`` runs the same engine as
``rag eval run`` (:func:`app.eval.run.runner.run`) once per selected suite, writes the same
report (``reports/eval_<UTC>.json`` + ``.md``; ``RAG_EVAL_OUT`` redirects it), and turns
it into one test per case plus one suite-level threshold test.

Settings (pytest option, else environment, else default):

=====================  =======================  ===========================
option                 environment              default
=====================  =======================  ===========================
``--model``            ``RAG_EVAL_MODEL``       ``offline:extractive``
``--judge``            ``RAG_EVAL_JUDGE``       ``offline:reference-judge``
``--prompt`` (repeat)  ``RAG_EVAL_PROMPT``      (the active versions); comma-separated in env
``--judge-samples``    ``RAG_EVAL_JUDGE_SAMPLES``  3
``--gate``             ``RAG_EVAL_GATE``        ``red-lines`` for an offline candidate,
                                                ``thresholds`` for a model
=====================  =======================  ===========================

The run's one status (:mod:`app.eval.report.status`, computed under that gate) is what the
terminal summary prints, word for word as ``rag eval run --gate …`` prints it.

What fails, and why — the report's one bad-case policy (:func:`app.eval.report.io.bad_cases`,
``report.bad_cases``), which this front end reads rather than re-derives:

* **Always a failure, on every provider** — a red line (``acl_leak``), a
  ``must_not_include`` violation, a failed injection case, or an evaluation error (the
  pipeline raised, or a judge reply stayed unparseable after its repair). These do not
  depend on how good the model is: an offline baseline that leaks restricted data or
  cannot be evaluated is as broken as a real model that does.
* **Quality bars** — per case: any judge score below ``[bad_cases] judge_score_below``
  of ``app/eval/scoring/thresholds.toml`` (3, seed 004 §12.3's bad case) or a refusal error; per suite: every threshold of ``app/eval/scoring/thresholds.toml``. With a real
  candidate model they fail the test. With the *offline* candidate (``offline:*``, what
  ``make test`` runs in CI) they are **reported, not failing**: the test is marked
  ``xfail`` with every metric in the reason, so the numbers stay visible in the run's
  summary, but a deterministic extractive baseline is not held to the bar of a model.
  A red line still fails the suite test on any provider.

Nothing here is tuned to make a suite pass: the per-case outcome is computed from the
report exactly as written to disk, and the failure message prints every metric of the case.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.eval.config import DEFAULT_JUDGE, DEFAULT_MODEL, RunConfig
from app.eval.run.runner import RunOutcome, run_sync
from app.paths import reports_dir


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rag-eval", "rag-starter evaluation suites")
    group.addoption("--model", dest="rag_eval_model", default=None, help="candidate provider")
    group.addoption("--judge", dest="rag_eval_judge", default=None, help="judge provider")
    group.addoption(
        "--prompt", dest="rag_eval_prompt", action="append", default=None, help="prompt version"
    )
    group.addoption("--judge-samples", dest="rag_eval_judge_samples", default=None, type=int)
    group.addoption(
        "--gate",
        dest="rag_eval_gate",
        default=None,
        choices=("thresholds", "red-lines"),
        help="what sets the run's status (default: red-lines offline, thresholds for a model)",
    )


def _opt(config: pytest.Config, name: str) -> Any:
    return config.getoption(name, default=None)


def eval_settings(config: pytest.Config) -> RunConfig:
    prompts = _opt(config, "rag_eval_prompt") or [
        p.strip() for p in os.environ.get("RAG_EVAL_PROMPT", "").split(",") if p.strip()
    ]
    judge = _opt(config, "rag_eval_judge") or os.environ.get("RAG_EVAL_JUDGE") or DEFAULT_JUDGE
    samples = _opt(config, "rag_eval_judge_samples") or int(
        os.environ.get("RAG_EVAL_JUDGE_SAMPLES", "3")
    )
    model = _opt(config, "rag_eval_model") or os.environ.get("RAG_EVAL_MODEL") or DEFAULT_MODEL
    gate = _opt(config, "rag_eval_gate") or os.environ.get("RAG_EVAL_GATE")
    settings = RunConfig(  # the model strings are parsed here, once (model_ref, judge_ref)
        suite="",
        model=model,
        judge=None if judge.lower() == "none" else judge,
        judge_samples=samples,
        prompts=tuple(prompts),
        concurrency=4,
    )
    if gate is None:  # the rule below: an offline baseline is held to its red lines only
        gate = "red-lines" if settings.model_ref.offline else "thresholds"
    return settings.replace(gate=gate)


@pytest.fixture(scope="session")
def eval_config(pytestconfig: pytest.Config) -> RunConfig:
    return eval_settings(pytestconfig)


@pytest.fixture(scope="session")
def offline_candidate(eval_config: RunConfig) -> bool:
    return eval_config.model_ref.offline


_RUNS: dict[str, RunOutcome] = {}


@pytest.fixture(scope="session")
def eval_suite(pytestconfig: pytest.Config, eval_config: RunConfig) -> Callable[[str], RunOutcome]:
    """``eval_suite("smoke")`` runs the suite once per session and returns its outcome."""
    out_dir = Path(os.environ.get("RAG_EVAL_OUT") or reports_dir())

    def get(suite: str) -> RunOutcome:
        if suite not in _RUNS:
            config = eval_config.replace(suite=suite)
            command = ["pytest", *(shlex.quote(a) for a in sys.argv[1:])]
            _RUNS[suite] = run_sync(config, out_dir=out_dir, command=command, front_end="pytest")
        return _RUNS[suite]

    return get


def summary_line(suite: str, outcome: RunOutcome) -> str:
    """The terminal summary's line for one suite: the run's one status line."""
    from app.eval.report.status import status_line

    totals = outcome.summary.totals
    return (
        f"rag eval [{suite}] status: {status_line(outcome.summary)} "
        f"({totals.cases_done} cases, {totals.duration_s:.1f}s) → {outcome.path}"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for suite, outcome in _RUNS.items():
        terminalreporter.write_line(summary_line(suite, outcome))
