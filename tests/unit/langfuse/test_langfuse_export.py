"""Langfuse export through the real SDK against a local server that records what it receives.

The server (tests/support/langfuse_server.py) answers the Langfuse public API routes the
SDK uses (projects, datasets, dataset items, scores) with minimal valid bodies and decodes
the OTLP/protobuf traces.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.eval.datasets.case import Case, Turn, load_suite
from app.eval.report.records import GitState, Report
from app.generation.pipeline.trace import Trace
from app.integrations.langfuse import (
    export_run,
    golden_cases,
    item_id,
    make_client,
    require_env,
    require_sdk,
)
from tests.support import reports as r
from tests.support.langfuse_server import LangfuseRecorder as Recorder
from tests.support.langfuse_server import LangfuseServer


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    with LangfuseServer() as srv:
        yield srv.url, srv.recorder


def report(dataset_sha: str = "d" * 64) -> Report:
    leak = r.info("lower", red_line=True)
    faith = r.info(kind="judge", unit="score 1-5", scale="continuous")
    cases = [
        r.case(
            f"kb-00{i}",
            {"faithfulness": f, "acl_leak": float(leak_value)},
            question=f"问题 {i}？",
            answer=f"回答 {i} [1]",
            red_lines=["acl_leak"] if leak_value else [],
        )
        for i, (f, leak_value) in enumerate([(4.33, 0), (None, 0), (5.0, 1)], start=1)
    ]
    base = r.report(
        cases,
        {"faithfulness": faith, "acl_leak": leak},
        candidate="offline:extractive",
        judge="offline:reference-judge",
        prompts={"system/kb_qa": {"version": "system/kb_qa_v2", "hash": "sha256:x"}},
        datasets=[
            {
                "name": "smoke",
                "version": "1.0",
                "sha256": dataset_sha,
                "path": "tests/eval/datasets/smoke_v1.0.jsonl",
            }
        ],
    )
    trace = {"prompt_version": "system/kb_qa_v2"}
    return base.model_copy(
        update={
            "cases": [c.model_copy(update={"trace": _trace(c.question, trace)}) for c in base.cases]
        }
    )


def _trace(question: str, extra: dict[str, str]) -> Trace:
    return Trace.model_validate(
        {
            "trace_id": "t",
            "created_at": "2026-11-30T19:00:00Z",
            "model": "offline:extractive",
            "user_acl": ["employee"],
            "question": question,
            "rewritten_query": question,
            "rewrite": {"strategy": "off", "triggered": False},
            "mode": "strict",
            **extra,
        }
    )


def golden() -> dict[str, Case]:
    return {
        f"kb-00{i}": Case(
            id=f"kb-00{i}",
            question=f"问题 {i}？",
            history=[Turn(role="user", content="之前的问题")] if i == 1 else [],
            golden_answer=f"答案 {i}",
            acl=["employee"],
            tags=["hr"],
            annotator="tester",
        )
        for i in (1, 2, 3)
    }


def test_missing_credentials_are_a_config_error_naming_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as exc:
        make_client({"LANGFUSE_PUBLIC_KEY": "pk"})
    assert "LANGFUSE_SECRET_KEY" in str(exc.value) and "LANGFUSE_HOST" in str(exc.value)
    assert "LANGFUSE_PUBLIC_KEY" not in str(exc.value)
    for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST", "LANGFUSE_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(
        ConfigError, match="LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LANGFUSE_HOST"
    ):
        export_run(report())  # no client given: read from the (empty) environment
    assert require_env(
        {"LANGFUSE_PUBLIC_KEY": "a", "LANGFUSE_SECRET_KEY": "b", "LANGFUSE_BASE_URL": "http://x"}
    ) == ("a", "b", "http://x")


def test_export_run_sends_items_traces_and_scores(
    server: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, rec = server
    pk = f"pk-lf-{uuid.uuid4().hex[:8]}"  # the SDK keeps one client per public key
    env = {"LANGFUSE_PUBLIC_KEY": pk, "LANGFUSE_SECRET_KEY": "sk-lf-test", "LANGFUSE_HOST": url}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    client = make_client(env)
    try:
        summary = export_run(report(), client=client, golden=golden())
    finally:
        client.shutdown()

    name = "rag-starter/smoke_v1.0"
    assert summary.dataset == name and summary.run_name == "20261130T190000Z-ab12cd"
    assert summary.items == 3 and summary.traces == 3
    assert summary.scores == 5 and summary.skipped_null_scores == 1  # kb-002 faithfulness is null
    assert any(a.startswith("Basic ") for a in rec.auth)

    (dataset,) = rec.bodies("POST", "/api/public/v2/datasets")
    assert dataset["name"] == name
    items = rec.bodies("POST", "/api/public/dataset-items")
    assert [i["id"] for i in items] == [item_id(name, f"kb-00{n}") for n in (1, 2, 3)]
    assert items[0]["input"]["question"] == "问题 1？" and items[0]["expectedOutput"] == "答案 1"
    assert items[0]["input"]["history"] == [{"role": "user", "content": "之前的问题"}]
    assert items[1]["input"]["history"] == [] and items[1]["expectedOutput"] == "答案 2"
    assert items[0]["metadata"]["case_id"] == "kb-001"

    scores = [s for batch in rec.bodies("POST", "/api/public/scores") for s in batch]
    got = sorted((s["name"], s["value"], s["traceId"]) for s in scores)
    assert [(n, v) for n, v, _ in got] == [
        ("acl_leak", 0.0),
        ("acl_leak", 0.0),
        ("acl_leak", 1.0),
        ("faithfulness", 4.33),
        ("faithfulness", 5.0),
    ]

    # one trace per case; its task span carries the prompt version and the recorded answer
    task_spans = [s for s in rec.spans if s["name"] == "experiment-item-task"]
    assert len(task_spans) == 3
    assert len({s["trace_id"] for s in task_spans}) == 3
    for s in task_spans:
        attrs = s["attrs"]
        assert (
            json.loads(attrs["langfuse.observation.metadata.prompt_version"]) == "system/kb_qa_v2"
        )
        # linked to the dataset run: the dataset, the item and the run's experiment id
        assert attrs["langfuse.experiment.dataset.id"] == "ds-1"
        assert attrs["langfuse.experiment.item.id"] in {i["id"] for i in items}
        assert attrs["langfuse.experiment.id"] == summary.experiment_id
        assert attrs["langfuse.experiment.name"] == "20261130T190000Z-ab12cd"
    outputs = sorted(str(s["attrs"].get("langfuse.observation.output")) for s in task_spans)
    assert outputs == [f"回答 {i} [1]" for i in (1, 2, 3)]
    # every score points at one of those traces
    assert {t for _, _, t in got} == {s["trace_id"] for s in task_spans}


def test_golden_answers_come_from_the_runs_dataset_file_only_while_it_is_unchanged() -> None:
    suite = load_suite("smoke")
    assert suite.path.name == "smoke_v1.0.jsonl"
    same = golden_cases(report(dataset_sha=suite.sha256))
    assert same == {c.id: c for c in suite.cases}  # the file the run scored, read back
    assert golden_cases(report(dataset_sha="0" * 64)) == {}  # an edited file is not the ruler


def test_the_experiment_run_read_back_has_golden_expected_outputs_and_the_git_sha(
    server: tuple[str, Recorder],
) -> None:
    """What an analyst sees in Langfuse: the Experiments API (synthesised by the fake from
    the spans, as Langfuse v4 does) lists one run whose items carry the golden answer as
    expected output, the recorded answer as output, the run's git sha, and their scores."""
    import httpx

    url, rec = server
    sha = "3f2c1a9e" + "0" * 32
    run = report()
    run = run.model_copy(
        update={"meta": run.meta.model_copy(update={"git": GitState(sha=sha, dirty=True)})}
    )
    pk = f"pk-lf-{uuid.uuid4().hex[:8]}"
    env = {"LANGFUSE_PUBLIC_KEY": pk, "LANGFUSE_SECRET_KEY": "sk-lf-test", "LANGFUSE_HOST": url}
    client = make_client(env)
    try:
        summary = export_run(run, client=client, golden=golden())
    finally:
        client.shutdown()
    assert rec.rejected == [] and rec.unknown == [], (rec.rejected, rec.unknown)
    # Langfuse v4 processes spans in real time only with this header
    assert rec.ingestion_versions and set(rec.ingestion_versions) == {"4"}
    # the dataset items themselves hold the golden answers (upserted by stable id)
    assert {i["metadata"]["case_id"]: i["expectedOutput"] for i in rec.items.values()} == {
        "kb-001": "答案 1",
        "kb-002": "答案 2",
        "kb-003": "答案 3",
    }

    auth = (pk, "sk-lf-test")
    with httpx.Client(base_url=url, auth=auth, timeout=5) as http:
        assert http.get("/api/public/experiments").status_code == 400  # fromStartTime required
        since = {"fromStartTime": "2020-01-01T00:00:00Z"}
        runs = http.get("/api/public/experiments", params=since).json()["data"]
        items = http.get(
            "/api/public/experiment-items",
            params={
                **since,
                "experimentId": summary.experiment_id,
                "fields": "io,metadata,itemMetadata,experimentMetadata,dataset,scores",
            },
        ).json()["data"]
    (only,) = runs
    assert only["id"] == summary.experiment_id and only["name"] == run.run_id
    assert only["datasetId"] == "ds-1" and only["itemCount"] == 3
    assert only["metadata"]["git_sha"] == sha and only["metadata"]["git_dirty"] == "true"

    by_case = {i["experimentItemMetadata"]["case_id"]: i for i in items}
    assert sorted(by_case) == ["kb-001", "kb-002", "kb-003"]
    answers = {c.id: c.answer for c in run.cases}
    for case_id, item in by_case.items():
        assert item["experimentItemId"] == item_id(summary.dataset, case_id)
        assert item["experimentDatasetId"] == "ds-1"
        assert item["expectedOutput"] == golden()[case_id].golden_answer
        assert item["output"] == answers[case_id]
        assert item["input"]["question"] == golden()[case_id].question
        assert item["metadata"]["git_sha"] == sha  # on every trace, not only the run
        assert item["experimentMetadata"]["git_sha"] == sha
    scores = {c: sorted((s["name"], s["value"]) for s in i["scores"]) for c, i in by_case.items()}
    assert scores == {
        "kb-001": [("acl_leak", 0.0), ("faithfulness", 4.33)],
        "kb-002": [("acl_leak", 0.0)],  # its faithfulness is null: skipped, not 0
        "kb-003": [("acl_leak", 1.0), ("faithfulness", 5.0)],
    }


def test_the_fake_refuses_what_the_api_would() -> None:
    """The fake checks bodies against the API's request types (else it proves nothing)."""
    import httpx

    with LangfuseServer() as srv, httpx.Client(base_url=srv.url, timeout=5) as http:
        bad = http.post("/api/public/dataset-items", json={"datasetName": "d", "expected": "x"})
        no_name = http.post("/api/public/v2/datasets", json={"description": "d"})
        score = http.post("/api/public/scores", json=[{"name": "m", "value": 1, "trace": "t"}])
        old = http.post("/api/public/dataset-run-items", json={"runName": "r"})
    assert (bad.status_code, no_name.status_code, score.status_code) == (400, 400, 400)
    assert "unrecognized key(s) ['expected']" in bad.json()["message"]
    assert "missing required field(s) ['name']" in no_name.json()["message"]
    assert old.status_code == 404 and srv.recorder.unknown == ["POST /api/public/dataset-run-items"]


@pytest.mark.parametrize(
    ("installed", "ok"),
    [("5.2.0", True), ("5.0.0rc1", True), ("4.9.3", False), ("3.2.1", False), ("6.0.0", False)],
)
def test_the_sdk_version_is_checked(installed: str, ok: bool) -> None:
    if ok:
        assert require_sdk(installed) == installed
        return
    with pytest.raises(ConfigError) as exc:
        require_sdk(installed)
    assert f"langfuse {installed} is installed" in str(exc.value)
    assert "langfuse>=5.0,<6" in str(exc.value) and ".[langfuse]" in str(exc.value)


def test_the_declared_extra_is_the_sdk_requirement() -> None:
    import tomllib

    from app.integrations.langfuse import SDK_REQUIREMENT
    from app.paths import repo_root

    pyproject = tomllib.loads((repo_root() / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["optional-dependencies"]["langfuse"] == [SDK_REQUIREMENT]
    assert not any(d.startswith("langfuse") for d in pyproject["project"]["dependencies"])
    makefile = (repo_root() / "Makefile").read_text(encoding="utf-8")
    assert "-e '.[dev,models,langfuse]'" in makefile  # make setup installs it
    from importlib.metadata import version

    assert require_sdk() == version("langfuse")  # the installed SDK meets it


def test_an_old_sdk_stops_rag_eval_run_langfuse_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    from click.testing import CliRunner

    from app.cli import cli

    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda n: "3.2.1" if n == "langfuse" else real(n)
    )
    for k, v in {"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LANGFUSE_HOST", "http://127.0.0.1:9")
    args = ["eval", "run", "--suite", "smoke", "--limit", "1", "--out", str(tmp_path)]
    result = CliRunner().invoke(cli, [*args, "--langfuse", "--quiet"])
    # a ConfigError: `rag` prints it without a traceback and exits 2 (app.cli.main)
    assert isinstance(result.exception, ConfigError), result.output
    assert "langfuse 3.2.1 is installed" in str(result.exception)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # before the run: no report
