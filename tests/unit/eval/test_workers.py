"""Worker processes of a CPU-bound run (app/eval/run/workers.py): the report of a run shared by
two processes is the report of one process running every case — compared field by field by
scripts/same_report.py, which reads both files with plain ``json`` — and a worker that dies
loses nothing and pays nothing twice."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.errors import ConfigError
from app.eval.config import RunConfig
from app.eval.run import workers
from app.eval.run.checkpoint import Checkpoint
from app.eval.run.runner import RunOutcome, run_sync
from app.llm.providers.base import Provider
from app.llm.types import ChatRequest
from tests.support.registry import registered

_spec = importlib.util.spec_from_file_location(
    "same_report", Path(__file__).resolve().parents[3] / "scripts" / "same_report.py"
)
assert _spec is not None and _spec.loader is not None
same_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(same_report)
differences = same_report.differences

LIMIT = 24
#: what two processes may change in a report: the setting itself, and the retry budget's
#: floor, which each process's engine has (the budget is per process)
EXPECTED = {".meta.config.workers", ".totals.engine.retry_budget.allowed"}


def _run(tmp: Path, name: str, **kw: Any) -> RunOutcome:
    config = RunConfig(suite="smoke", limit=LIMIT, cache=False, **kw)
    return run_sync(config, out_dir=tmp / name, runs_root=tmp / "runs")


def _data(outcome: RunOutcome) -> dict[str, Any]:
    assert outcome.path is not None
    data: dict[str, Any] = json.loads(outcome.path.read_text(encoding="utf-8"))
    return data


def _paths(diffs: list[str]) -> set[str]:
    return {d.split(":")[0] for d in diffs}


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("single")
    outcome = _run(tmp, "one", workers=1)
    return {"outcome": outcome, "data": _data(outcome)}


def test_two_processes_write_the_report_of_one(tmp_path: Path, single: dict[str, Any]) -> None:
    pair = _run(tmp_path, "two", workers=2)
    data = _data(pair)
    diffs = differences(single["data"], data)
    assert _paths(diffs) <= EXPECTED, diffs
    assert data["meta"]["config"]["workers"] == 2
    assert data["totals"]["engine"]["calls"] == single["data"]["totals"]["engine"]["calls"] > 0
    assert pair.calls == single["outcome"].calls  # the worker's calls are counted too
    # the worker really ran cases: its counters are in the checkpoint under its own key
    cp = Checkpoint.open(pair.run_id, tmp_path / "runs")
    try:
        records = cp.processes()
    finally:
        cp.close()
    mine = [r for r in records if r.get("worker_of")]
    assert len(mine) == 1 and mine[0]["engine"]["calls"] > 0
    assert mine[0]["duration_s"] == 0.0  # a resumed run sums durations: its time is the main's
    assert len(pair.worker_rss_mb) == 1 and pair.worker_rss_mb[0] > 20


def _fake_worker(tmp: Path, body: str) -> tuple[str, ...]:
    script = tmp / "fake_worker.py"
    script.write_text(body, encoding="utf-8")
    return (sys.executable, str(script))


DIES_AT_ONCE = """
import sys
from app.eval.run import workers
hello = workers._recv(sys.stdin.buffer)
batch = workers._recv(sys.stdin.buffer)  # take cases, then die without a word
sys.exit(3)
"""

DIES_AFTER_COMMITTING = """
import os, sys
from app.eval.run import workers
real = workers._send
def send(out, obj):
    if isinstance(obj, list):  # the batch is in the checkpoint; its digests never leave
        os._exit(4)
    real(out, obj)
workers._send = send
sys.exit(workers.main())
"""


@pytest.mark.parametrize(("body", "code"), [(DIES_AT_ONCE, 3), (DIES_AFTER_COMMITTING, 4)])
def test_a_dead_worker_loses_nothing_and_pays_nothing_twice(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    single: dict[str, Any],
    body: str,
    code: int,
) -> None:
    monkeypatch.setattr(workers, "WORKER_COMMAND", _fake_worker(tmp_path, body))
    with caplog.at_level(logging.WARNING, logger="app.eval.run.workers"):
        pair = _run(tmp_path, "two", workers=2)
    data = _data(pair)
    assert _paths(differences(single["data"], data)) <= EXPECTED
    assert len(data["cases"]) == LIMIT
    # every case's calls counted once: the committed cases' calls are in the dead worker's
    # record, the others were made here (none twice)
    assert data["totals"]["engine"]["calls"] == single["data"]["totals"]["engine"]["calls"]
    assert f"exited with code {code}" in caplog.text


def test_auto_by_cores_and_cases_and_never_with_a_network_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offline = RunConfig(suite="s")
    assert offline.workers == "auto"  # the default
    monkeypatch.setattr(workers, "cores", lambda: 2)
    assert workers.planned(offline, 10_000, own_engine=True) == 2  # one per core
    assert workers.planned(offline, 1999, own_engine=True) == 1  # one per 1,000 cases
    assert workers.planned(offline, 2000, own_engine=True) == 2
    assert workers.planned(offline, 369, own_engine=True) == 1  # a full suite: one
    monkeypatch.setattr(workers, "cores", lambda: 16)
    assert workers.planned(offline, 10_000, own_engine=True) == 4  # at most four
    assert workers.planned(offline, 3500, own_engine=True) == 3
    monkeypatch.setattr(workers, "cores", lambda: 1)
    assert workers.planned(offline, 10_000, own_engine=True) == 1
    assert workers.planned(offline.replace(workers=1), 5000, own_engine=True) == 1  # asked
    assert workers.planned(offline.replace(workers=3), 5000, own_engine=True) == 3
    assert workers.planned(offline.replace(workers=3), 2, own_engine=True) == 2  # <= cases
    assert workers.planned(offline.replace(workers=2), 5000, own_engine=False) == 1  # theirs
    assert workers.planned(offline.replace(workers=2, batch=True), 5000, own_engine=True) == 1
    network = RunConfig(suite="s", model="openai:gpt-4o-mini")
    assert workers.planned(network, 5000, own_engine=True) == 1  # auto: one process
    workers.check(network)  # auto: fine
    workers.check(network.replace(workers=1))
    with pytest.raises(ConfigError, match="network provider"):
        workers.check(network.replace(workers=2))


def test_what_runs_in_process_is_the_providers_own_flag() -> None:
    """One mechanism decides: the class flag the engine's short path reads
    (Provider.in_process), not the family name."""

    class Here(Provider):
        family = "here"
        in_process = True

        async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Any:
            raise AssertionError("not called")

    class Away(Here):
        family = "away"
        in_process = False

    with registered({"here": Here, "away": Away}):
        assert workers.in_process(RunConfig(suite="s", model="here:m", judge="here:j"))
        assert workers.in_process(RunConfig(suite="s", model="here:m", judge=None))
        assert not workers.in_process(RunConfig(suite="s", model="here:m", judge="away:j"))
        assert not workers.in_process(RunConfig(suite="s", model="away:m", judge="here:j"))
        with pytest.raises(ConfigError, match="network provider"):
            workers.check(RunConfig(suite="s", model="away:m", judge="here:j", workers=2))
    assert workers.in_process(RunConfig(suite="s"))  # the offline defaults


def _rag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out + err


def test_cli_refuses_workers_with_a_network_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "run", "--suite", "smoke", "--quiet", "--out", str(tmp_path)]
    code, text = _rag([*argv, "--workers", "2", "--model", "openai:gpt-4o-mini"], capsys)
    assert code == 2, text
    assert "--workers 2" in text and "network provider" in text
    assert "Traceback" not in text
    code, text = _rag([*argv, "--workers", "0"], capsys)
    assert code == 2 and "--workers" in text
    code, text = _rag([*argv, "--workers", "many"], capsys)
    assert code == 2 and "give auto or a number" in text and "Traceback" not in text
