"""A local Langfuse on 127.0.0.1 that records what the Langfuse SDK sends.

    GET  /api/public/projects          one project (the SDK's auth check)
    POST /api/public/v2/datasets       echoes a dataset (id ``ds-1``)
    POST /api/public/dataset-items     echoes the item
    POST /api/public/scores            202 Accepted
    POST /api/public/otel/v1/traces    OTLP/protobuf (gzip or not), decoded into spans

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NOW = "2026-11-30T19:00:00.000Z"


@dataclass
class LangfuseRecorder:
    url: str = ""
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    auth: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)
    echo_credentials: bool = False
    echo_paths: tuple[str, ...] = ("/",)

    def bodies(self, method: str, path: str) -> list[Any]:
        return [b for m, p, b in self.requests if m == method and p.split("?")[0] == path]

    def scores(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for body in self.bodies("POST", "/api/public/scores"):
            out.extend(body if isinstance(body, list) else [body])
        return out

    def basic_credentials(self) -> set[str]:
        return {
            base64.b64decode(a.split(" ", 1)[1]).decode()
            for a in self.auth
            if a.startswith("Basic ")
        }


def _attr(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


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
            if self.path.startswith("/api/public/projects"):
                org = {"id": "org-1", "name": "org"}
                project = {"id": "proj-1", "name": "p", "organization": org, "metadata": {}}
                self._reply(200, {"data": [project]})
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
                                    "attrs": {a.key: _attr(a.value) for a in span.attributes},
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
                rec.unknown.append(f"POST {path}")
                self._reply(404, {"message": f"not emulated: {path}"})

    return Handler


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
