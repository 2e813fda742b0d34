"""Langfuse export through the real SDK against a local server that records what it receives.

The server answers the Langfuse public API routes the SDK uses (projects, datasets,
dataset items, scores) with minimal valid bodies and decodes the OTLP/protobuf traces.
"""

from __future__ import annotations

import gzip
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from app.errors import ConfigError
from app.eval.langfuse_export import export_run, item_id, make_client, require_env

NOW = "2026-11-30T19:00:00.000Z"


@dataclass
class Recorder:
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    auth: set[str] = field(default_factory=set)

    def bodies(self, method: str, path: str) -> list[Any]:
        return [b for m, p, b in self.requests if m == method and p.split("?")[0] == path]


def attr_value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def make_handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _reply(self, status: int, body: Any, ctype: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            return raw

        def do_GET(self) -> None:
            rec.auth.add(self.headers.get("Authorization", ""))
            rec.requests.append(("GET", self.path, None))
            if self.path.startswith("/api/public/projects"):
                org = {"id": "org-1", "name": "org"}
                self._reply(
                    200,
                    {"data": [{"id": "proj-1", "name": "p", "organization": org, "metadata": {}}]},
                )
            else:
                self._reply(404, {"message": f"not emulated: {self.path}"})

        def do_POST(self) -> None:
            rec.auth.add(self.headers.get("Authorization", ""))
            raw = self._body()
            path = self.path.split("?")[0]
            if path == "/api/public/otel/v1/traces":
                req = ExportTraceServiceRequest()
                req.ParseFromString(raw)
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            rec.spans.append(
                                {
                                    "name": span.name,
                                    "trace_id": span.trace_id.hex(),
                                    "attrs": {a.key: attr_value(a.value) for a in span.attributes},
                                }
                            )
                rec.requests.append(("POST", path, None))
                self._reply(200, b"", "application/x-protobuf")
                return
            body = json.loads(raw or b"null")
            rec.requests.append(("POST", path, body))
            if path == "/api/public/v2/datasets":
                self._reply(
                    200,
                    {
                        "id": "ds-1",
                        "name": body["name"],
                        "description": body.get("description"),
                        "metadata": body.get("metadata"),
                        "projectId": "proj-1",
                        "createdAt": NOW,
                        "updatedAt": NOW,
                    },
                )
            elif path == "/api/public/dataset-items":
                self._reply(
                    200,
                    {
                        "id": body["id"],
                        "status": "ACTIVE",
                        "input": body.get("input"),
                        "expectedOutput": body.get("expectedOutput"),
                        "metadata": body.get("metadata"),
                        "sourceTraceId": None,
                        "sourceObservationId": None,
                        "datasetId": "ds-1",
                        "datasetName": body["datasetName"],
                        "createdAt": NOW,
                        "updatedAt": NOW,
                        "mediaReferences": [],
                    },
                )
            elif path == "/api/public/scores":
                self._reply(202, {"message": "Accepted"})
            else:
                self._reply(404, {"message": f"not emulated: {path}"})

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    rec = Recorder()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(rec))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", rec
    finally:
        httpd.shutdown()
        httpd.server_close()


def report() -> dict[str, Any]:
    cases = []
    for i, (f, leak) in enumerate([(4.33, 0), (None, 0), (5.0, 1)], start=1):
        cases.append(
            {
                "id": f"kb-00{i}",
                "question": f"问题 {i}？",
                "golden_answer": f"答案 {i}",
                "tags": ["hr"],
                "difficulty": "easy",
                "metrics": {
                    "faithfulness": {
                        "value": f,
                        "reason": None if f is not None else "judge error",
                    },
                    "acl_leak": {"value": leak, "reason": None},
                },
                "answer": f"回答 {i} [1]",
                "trace": {"prompt_version": "system/kb_qa_v2"},
                "errors": [],
            }
        )
    return {
        "schema_version": "1",
        "run_id": "20261130T190000Z-ab12cd",
        "meta": {
            "candidate": {"provider": "offline:extractive", "offline": True},
            "judge": {"provider": "offline:reference-judge", "offline": True, "samples": 3},
            "prompts": {"system/kb_qa": {"version": "system/kb_qa_v2", "hash": "sha256:x"}},
            "datasets": [{"name": "smoke", "version": "1.0", "sha256": "d" * 64}],
        },
        "metrics": {},
        "cases": cases,
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
        summary = export_run(report(), client=client)
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
