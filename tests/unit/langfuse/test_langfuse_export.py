"""Langfuse export through the real SDK against a local server that records what it receives.

The server (tests/support/langfuse_server.py) answers the Langfuse public API routes the
SDK uses (projects, datasets, dataset items, scores) with minimal valid bodies and decodes
the OTLP/protobuf traces.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from app.errors import ConfigError
from app.eval.datasets import Case, Turn, load_suite
from app.eval.langfuse_export import export_run, golden_cases, item_id, make_client, require_env
from app.eval.records import Report
from app.generation.pipeline.trace import Trace
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
