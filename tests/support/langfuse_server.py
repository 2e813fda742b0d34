"""A local Langfuse on 127.0.0.1 that records what the Langfuse SDK sends — a model of the
current (Langfuse v4) public API for datasets and experiment runs.

Write side (what ``rag eval run --langfuse`` calls through the SDK):

    GET  /api/public/projects          one project (the SDK's auth check)
    POST /api/public/v2/datasets       CreateDatasetRequest → a dataset (id ``ds-1``)
    POST /api/public/dataset-items     CreateDatasetItemRequest → the item
    POST /api/public/scores            a list of CreateScoreRequest → 202 Accepted
    POST /api/public/otel/v1/traces    OTLP/protobuf (gzip or not), decoded into spans; the
                                       ``x-langfuse-ingestion-version`` header is recorded

Request bodies are checked against the API's request types: a field the type does not have,
or a missing required one, is a 400 (listed in :attr:`LangfuseRecorder.rejected`), as the
real server's validation answers. ``POST /api/public/dataset-run-items`` (the v3 way of
linking a trace to an item, deprecated in v4) is not emulated.

Read side, synthesised like the server does from the spans' experiment attributes
(``langfuse.experiment.*`` — an experiment run is the set of item-root spans that carry one
``langfuse.experiment.id``), so a test reads back what an analyst would see:

    GET  /api/public/experiments        ?fromStartTime= (required) [&id= &name= &datasetId=]
    GET  /api/public/experiment-items   ?fromStartTime= (required) [&experimentId=
                                        &experimentName= &fields=io,metadata,itemMetadata,
                                        experimentMetadata,dataset,scores]

Anything else gets a 404 and is listed in :attr:`LangfuseRecorder.unknown`. With
``echo_credentials=True`` every POST (under ``echo_paths``) fails with a 401 whose body quotes the credentials it
received (the ``Authorization`` header and the secret key decoded from it), as some hosts
and proxies do. Every request
is kept in :attr:`LangfuseRecorder.requests` (JSON bodies decoded, gunzipped first when
``Content-Encoding: gzip``) and every ``Authorization`` header in
:attr:`LangfuseRecorder.auth`.

Start with ``with LangfuseServer() as server:`` or ``.start()`` / ``.stop()``; what it
received is on ``server.recorder`` (whose ``url`` is set once the server is up).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

NOW = "2026-11-30T19:00:00.000Z"

# the request types of the public API (name -> (required fields, optional fields))
REQUEST_TYPES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "CreateDatasetRequest": (
        frozenset({"name"}),
        frozenset({"description", "metadata", "inputSchema", "expectedOutputSchema"}),
    ),
    "CreateDatasetItemRequest": (
        frozenset({"datasetName"}),
        frozenset(
            {"input", "expectedOutput", "metadata", "sourceTraceId", "sourceObservationId"}
            | {"id", "status"}
        ),
    ),
    "CreateScoreRequest": (
        frozenset({"name", "value"}),
        frozenset(
            {"id", "traceId", "sessionId", "observationId", "datasetRunId", "comment"}
            | {"metadata", "environment", "queueId", "dataType", "configId", "timestamp"}
        ),
    ),
}
EXPERIMENT_FIELDS = ("io", "metadata", "itemMetadata", "experimentMetadata", "dataset", "scores")


def check_body(type_name: str, body: Any) -> str | None:
    """Why ``body`` is not a ``type_name`` (a 400), or ``None``."""
    required, optional = REQUEST_TYPES[type_name]
    if not isinstance(body, dict):
        return f"{type_name}: expected an object, got {type(body).__name__}"
    if missing := sorted(required - set(body)):
        return f"{type_name}: missing required field(s) {missing}"
    if extra := sorted(set(body) - required - optional):
        return f"{type_name}: unrecognized key(s) {extra}"
    return None


@dataclass
class LangfuseRecorder:
    url: str = ""
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    auth: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # 400s: bodies the API would refuse
    ingestion_versions: list[str] = field(default_factory=list)  # per OTLP request
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> dataset
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> dataset item
    echo_credentials: bool = False
    echo_paths: tuple[str, ...] = ("/",)

    def bodies(self, method: str, path: str) -> list[Any]:
        return [b for m, p, b in self.requests if m == method and p.split("?")[0] == path]

    def scores(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for body in self.bodies("POST", "/api/public/scores"):
            out.extend(body if isinstance(body, list) else [body])
        return out

    def experiment_items(self) -> list[dict[str, Any]]:
        """Every item-root span, as the Experiments API's ExperimentItem (all fields)."""
        scores: dict[str, list[dict[str, Any]]] = {}
        for score in self.scores():
            scores.setdefault(str(score.get("traceId")), []).append(score)
        out = []
        for span in self.spans:
            attrs = span["attrs"]
            if attrs.get("langfuse.experiment.item.root_observation_id") != span["span_id"]:
                continue  # a child span of the item (evaluator, …), not the item's root
            out.append(
                {
                    "id": span["span_id"],
                    "traceId": span["trace_id"],
                    "startTime": span["start"],
                    "endTime": span["end"],
                    "level": attrs.get("langfuse.observation.level", "DEFAULT"),
                    "environment": attrs.get("langfuse.environment", "default"),
                    "experimentId": attrs["langfuse.experiment.id"],
                    "experimentName": attrs["langfuse.experiment.name"],
                    "experimentItemId": attrs["langfuse.experiment.item.id"],
                    "experimentDatasetId": attrs.get("langfuse.experiment.dataset.id"),
                    "experimentItemVersion": attrs.get("langfuse.experiment.item.version"),
                    "experimentDescription": attrs.get("langfuse.experiment.description"),
                    "input": _json_attr(attrs.get("langfuse.observation.input")),
                    "output": _json_attr(attrs.get("langfuse.observation.output")),
                    "expectedOutput": _json_attr(
                        attrs.get("langfuse.experiment.item.expected_output")
                    ),
                    "metadata": {
                        k.removeprefix("langfuse.observation.metadata."): _json_attr(v)
                        for k, v in attrs.items()
                        if k.startswith("langfuse.observation.metadata.")
                    },
                    "experimentItemMetadata": _json_attr(
                        attrs.get("langfuse.experiment.item.metadata")
                    ),
                    "experimentMetadata": _json_attr(attrs.get("langfuse.experiment.metadata")),
                    "scores": scores.get(span["trace_id"], []),
                }
            )
        return out

    def experiments(self) -> list[dict[str, Any]]:
        """One Experiment per ``langfuse.experiment.id`` seen on an item root."""
        runs: dict[str, dict[str, Any]] = {}
        for item in self.experiment_items():
            run = runs.setdefault(
                item["experimentId"],
                {
                    "id": item["experimentId"],
                    "name": item["experimentName"],
                    "description": item["experimentDescription"],
                    "datasetId": item["experimentDatasetId"],
                    "metadata": item["experimentMetadata"],
                    "startTime": item["startTime"],
                    "itemCount": 0,
                },
            )
            run["itemCount"] += 1
            run["startTime"] = min(run["startTime"], item["startTime"])
        return list(runs.values())

    def basic_credentials(self) -> set[str]:
        return {
            base64.b64decode(a.split(" ", 1)[1]).decode()
            for a in self.auth
            if a.startswith("Basic ")
        }


def _attr(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _json_attr(value: Any) -> Any:
    """The SDK writes structured attribute values as JSON strings; plain text stays text."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _iso(unix_nano: int) -> str:
    return datetime.fromtimestamp(unix_nano / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _handler(rec: LangfuseRecorder) -> type[BaseHTTPRequestHandler]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: Any, ctype: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _raw(self) -> bytes:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            return raw

        def do_GET(self) -> None:
            rec.auth.add(self.headers.get("Authorization", ""))
            rec.requests.append(("GET", self.path, None))
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path.startswith("/api/public/projects"):
                org = {"id": "org-1", "name": "org"}
                project = {"id": "proj-1", "name": "p", "organization": org, "metadata": {}}
                self._reply(200, {"data": [project]})
            elif url.path in ("/api/public/experiments", "/api/public/experiment-items"):
                if "fromStartTime" not in query:  # required by the API: a bounded query
                    self._reply(400, {"message": "fromStartTime is required"})
                    return
                since = query["fromStartTime"]
                if url.path == "/api/public/experiments":
                    rows = [
                        e
                        for e in rec.experiments()
                        if e["startTime"] >= since
                        and query.get("id", e["id"]) == e["id"]
                        and query.get("name", e["name"]) == e["name"]
                        and query.get("datasetId", e["datasetId"]) == e["datasetId"]
                    ]
                else:
                    fields = set((query.get("fields") or "").split(",")) - {""}
                    if bad := sorted(fields - set(EXPERIMENT_FIELDS)):
                        self._reply(400, {"message": f"unknown field group(s) {bad}"})
                        return
                    rows = [
                        _select(i, fields)
                        for i in rec.experiment_items()
                        if i["startTime"] >= since
                        and query.get("experimentId", i["experimentId"]) == i["experimentId"]
                        and query.get("experimentName", i["experimentName"]) == i["experimentName"]
                    ]
                self._reply(200, {"data": rows, "meta": {"cursor": None}})
            else:
                rec.unknown.append(f"GET {self.path}")
                self._reply(404, {"message": f"not emulated: {self.path}"})

        def do_POST(self) -> None:
            rec.auth.add(self.headers.get("Authorization", ""))
            raw = self._raw()
            path = self.path.split("?")[0]
            if rec.echo_credentials and path.startswith(rec.echo_paths):
                header = self.headers.get("Authorization", "")
                decoded = ""
                if header.startswith("Basic "):
                    decoded = base64.b64decode(header.split(" ", 1)[1]).decode()
                public, _, secret = decoded.partition(":")
                rec.requests.append(("POST", path, None))
                data = json.dumps(
                    {"error": f"bad key {secret} for {public}", "authorization": header}
                ).encode()
                self.send_response_only(401)  # a bare proxy: no Server / Date headers
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
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
                                    "span_id": span.span_id.hex(),
                                    "parent_id": span.parent_span_id.hex() or None,
                                    "start": _iso(span.start_time_unix_nano),
                                    "end": _iso(span.end_time_unix_nano),
                                    "attrs": {a.key: _attr(a.value) for a in span.attributes},
                                }
                            )
                rec.ingestion_versions.append(self.headers.get("x-langfuse-ingestion-version", ""))
                rec.requests.append(("POST", path, None))
                self._reply(200, b"", "application/x-protobuf")
                return
            body = json.loads(raw or b"null")
            rec.requests.append(("POST", path, body))
            kind = {
                "/api/public/v2/datasets": "CreateDatasetRequest",
                "/api/public/dataset-items": "CreateDatasetItemRequest",
            }.get(path)
            problems = [check_body(kind, body)] if kind else []
            if path == "/api/public/scores":
                batch = body if isinstance(body, list) else [body]
                problems = [check_body("CreateScoreRequest", b) for b in batch]
            if problem := next((p for p in problems if p), None):
                rec.rejected.append(f"POST {path}: {problem}")
                self._reply(400, {"message": problem})
                return
            if path == "/api/public/v2/datasets":
                rec.datasets[body["name"]] = body
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
                rec.items[body["id"]] = body
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
                rec.unknown.append(f"POST {path}")
                self._reply(404, {"message": f"not emulated: {path}"})

    return Handler


def _select(item: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """The ExperimentItem fields a ``fields=`` query returns (core ones always)."""
    groups = {
        "io": ("input", "output", "expectedOutput"),
        "metadata": ("metadata",),
        "itemMetadata": ("experimentItemMetadata",),
        "experimentMetadata": ("experimentMetadata", "experimentDescription"),
        "dataset": ("experimentDatasetId", "experimentItemVersion"),
        "scores": ("scores",),
    }
    dropped = {k for group, keys in groups.items() if group not in fields for k in keys}
    return {k: v for k, v in item.items() if k not in dropped}


class LangfuseServer:
    """Start with ``with LangfuseServer() as server:`` or ``.start()``; stop with ``.stop()``."""

    def __init__(
        self, *, echo_credentials: bool = False, echo_paths: tuple[str, ...] = ("/",)
    ) -> None:
        self.recorder = LangfuseRecorder(echo_credentials=echo_credentials, echo_paths=echo_paths)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> LangfuseServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.recorder))
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
        thread.daemon = True
        thread.start()
        self._httpd, self._thread = httpd, thread
        self.recorder.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LangfuseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return self.recorder.url
