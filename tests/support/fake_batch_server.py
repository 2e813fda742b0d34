"""A real HTTP server on 127.0.0.1 speaking the two providers' batch API shapes.

Anthropic Message Batches (``ANTHROPIC_BASE_URL=<url>``)::

    POST /v1/messages/batches                 {requests: [{custom_id, params}]}
    GET  /v1/messages/batches/{id}            processing_status in_progress → ended
    GET  /v1/messages/batches/{id}/results    JSONL {custom_id, result: {type, message|error}}

OpenAI Batch (``openai:<model>@<url>/v1``)::

    POST /v1/files                            multipart, purpose=batch
    POST /v1/batches                          {input_file_id, endpoint, completion_window}
    GET  /v1/batches/{id}                     validating → in_progress → completed | expired
    GET  /v1/files/{id}/content               output / error JSONL

A batch ends after ``polls_to_end`` status reads. Faults, chosen per request by
``errored(custom_id)`` (a per-request error) and per batch by ``expire_first`` (the first N
batches end expired with only ``expire_keep`` of their requests done), per succeeded request
by ``garble(custom_id, reply)`` (what stands in the result instead of the reply: Anthropic's
``message``, OpenAI's ``response.body``; an HTML string, a null message, …) and per results
file by ``extra_lines`` (lines added as they are, e.g. an HTML page). Answers come from
``responder(body) -> str`` (default: the single-call fake's echo). ``stats`` counts batches
created, requests received, status polls and result downloads.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.fake_llm_server import default_responder


def _count(text: str) -> int:
    return max(1, len(text.split()))


@dataclass
class _Batch:
    id: str
    api: str  # anthropic | openai
    requests: list[dict[str, Any]]
    created: float = field(default_factory=time.time)
    polls: int = 0
    expired: bool = False
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class FakeBatchServer:
    def __init__(
        self,
        *,
        polls_to_end: int = 1,
        responder: Callable[[dict[str, Any]], str] = default_responder,
        errored: Callable[[str], bool] = lambda _cid: False,
        expire_first: int = 0,
        expire_keep: int = 0,
        garble: Callable[[str, dict[str, Any]], object] = lambda _cid, reply: reply,
        extra_lines: tuple[str, ...] = (),
        fail_results: int = 0,
    ) -> None:
        self.fail_results = fail_results  # the first N result downloads answer 500
        self.down = False  # True: every request answers 503 (a provider that stopped answering)
        self.garble = garble
        self.extra_lines = extra_lines
        self.polls_to_end = polls_to_end
        self.responder = responder
        self.errored = errored
        self.expire_first = expire_first
        self.expire_keep = expire_keep
        self.batches: dict[str, _Batch] = {}
        self.files: dict[str, bytes] = {}
        self.stats = {"batches": 0, "requests": 0, "polls": 0, "results": 0, "uploads": 0}
        self.lock = threading.Lock()
        self._server = _HTTPServer(("127.0.0.1", 0), self._handler())
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------
    def __enter__(self) -> FakeBatchServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- behaviour ----------------------------------------------------------------------
    def _new_batch(self, api: str, requests: list[dict[str, Any]]) -> _Batch:
        with self.lock:
            n = self.stats["batches"]
            self.stats["batches"] += 1
            self.stats["requests"] += len(requests)
            prefix = "msgbatch_" if api == "anthropic" else "batch_"
            b = _Batch(id=prefix + uuid.uuid4().hex[:20], api=api, requests=requests)
            b.expired = n < self.expire_first
            self.batches[b.id] = b
            return b

    def _ended(self, b: _Batch) -> bool:
        return b.polls >= self.polls_to_end

    def _done_requests(self, b: _Batch) -> list[dict[str, Any]]:
        return b.requests[: self.expire_keep] if b.expired else b.requests

    def _answer(self, body: dict[str, Any]) -> str:
        return self.responder(body)

    # -- Anthropic shapes -----------------------------------------------------------------
    def _anthropic_batch(self, b: _Batch) -> dict[str, Any]:
        ended = self._ended(b)
        n = len(b.requests)
        done = len(self._done_requests(b))
        errored = sum(1 for r in self._done_requests(b) if self.errored(r["custom_id"]))
        counts = {
            "processing": 0 if ended else n,
            "succeeded": done - errored if ended else 0,
            "errored": errored if ended else 0,
            "canceled": 0,
            "expired": n - done if ended else 0,
        }
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b.created))
        return {
            "id": b.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": created,
            "expires_at": created,
            "ended_at": created if ended else None,
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{b.id}/results" if ended else None,
        }

    def _anthropic_results(self, b: _Batch) -> bytes:
        done_ids = {r["custom_id"] for r in self._done_requests(b)}
        lines = []
        for r in b.requests:
            cid = r["custom_id"]
            if cid not in done_ids:
                result: dict[str, Any] = {"type": "expired"}
            elif self.errored(cid):
                result = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "fake: bad request"},
                    },
                }
            else:
                params = r["params"]
                text = self._answer(params)
                prompt = " ".join(str(m.get("content", "")) for m in params.get("messages", []))
                message = {
                    "id": "msg_" + uuid.uuid4().hex[:12],
                    "type": "message",
                    "role": "assistant",
                    "model": params.get("model", "fake"),
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": _count(prompt), "output_tokens": _count(text)},
                }
                result = {"type": "succeeded", "message": self.garble(cid, message)}
            lines.append(json.dumps({"custom_id": cid, "result": result}, ensure_ascii=False))
        return ("\n".join([*lines, *self.extra_lines]) + "\n").encode("utf-8")

    # -- OpenAI shapes ------------------------------------------------------------------
    def _openai_batch(self, b: _Batch) -> dict[str, Any]:
        ended = self._ended(b)
        status = "in_progress" if not ended else ("expired" if b.expired else "completed")
        if ended and b.output_file_id is None:
            self._openai_files(b)
        n = len(b.requests)
        failed = n - sum(1 for r in self._done_requests(b) if not self.errored(r["custom_id"]))
        return {
            "id": b.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": None,
            "input_file_id": b.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": b.output_file_id,
            "error_file_id": b.error_file_id,
            "created_at": int(b.created),
            "in_progress_at": int(b.created),
            "expires_at": int(b.created) + 86400,
            "completed_at": int(time.time()) if ended and not b.expired else None,
            "expired_at": int(time.time()) if ended and b.expired else None,
            "request_counts": {
                "total": n,
                "completed": n - failed if ended else 0,
                "failed": failed if ended else 0,
            },
            "metadata": None,
        }

    def _openai_files(self, b: _Batch) -> None:
        done_ids = {r["custom_id"] for r in self._done_requests(b)}
        out, err = [], []
        for r in b.requests:
            cid = r["custom_id"]
            rid = "req_" + uuid.uuid4().hex[:12]
            if cid not in done_ids:
                err.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "This request could not be executed before the completion window expired.",
                        },
                    }
                )
            elif self.errored(cid):
                err.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "response": {
                            "status_code": 400,
                            "request_id": rid,
                            "body": {
                                "error": {
                                    "message": "fake: bad request",
                                    "type": "invalid_request_error",
                                }
                            },
                        },
                        "error": None,
                    }
                )
            else:
                body = r["body"]
                text = self._answer(body)
                prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
                p, c = _count(prompt), _count(text)
                reply = {
                    "id": "chatcmpl-" + rid,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "logprobs": None,
                            "message": {"role": "assistant", "content": text},
                        }
                    ],
                    "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
                }
                out.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "error": None,
                        "response": {
                            "status_code": 200,
                            "request_id": rid,
                            "body": self.garble(cid, reply),
                        },
                    }
                )
        for rows, attr in ((out, "output_file_id"), (err, "error_file_id")):
            if rows:
                fid = "file-" + uuid.uuid4().hex[:20]
                lines = [json.dumps(x, ensure_ascii=False) for x in rows]
                if attr == "output_file_id":
                    lines += self.extra_lines
                self.files[fid] = ("\n".join(lines) + "\n").encode("utf-8")
                setattr(b, attr, fid)

    # -- HTTP ---------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, code: int, payload: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", "req_" + uuid.uuid4().hex[:8])
                self.end_headers()
                self.wfile.write(payload)

            def _json(self, code: int, obj: Any) -> None:
                self._send(code, json.dumps(obj, ensure_ascii=False).encode("utf-8"))

            def _body(self) -> bytes:
                n = int(self.headers.get("content-length") or 0)
                return self.rfile.read(n)

            def _fault(self, path: str) -> bool:
                """The server's injected faults; True when one answered."""
                if server.down:
                    self._json(503, {"error": {"type": "overloaded", "message": "down"}})
                    return True
                results = path.endswith("/results") or path.endswith("/content")
                if results and server.fail_results > 0:
                    with server.lock:
                        server.fail_results -= 1
                        server.stats["results"] += 1
                    self._json(500, {"error": {"type": "api_error", "message": "try again"}})
                    return True
                return False

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if self._fault(path):
                    return
                if m := re.fullmatch(r"/v1/messages/batches/([^/]+)", path):
                    b = server.batches.get(m.group(1))
                    if b is None:
                        return self._json(
                            404,
                            {
                                "type": "error",
                                "error": {"type": "not_found_error", "message": "no such batch"},
                            },
                        )
                    with server.lock:
                        b.polls += 1
                        server.stats["polls"] += 1
                    return self._json(200, server._anthropic_batch(b))
                if m := re.fullmatch(r"/v1/messages/batches/([^/]+)/results", path):
                    b = server.batches[m.group(1)]
                    server.stats["results"] += 1
                    return self._send(200, server._anthropic_results(b), "application/x-jsonl")
                if m := re.fullmatch(r"/v1/batches/([^/]+)", path):
                    b = server.batches.get(m.group(1))
                    if b is None:
                        return self._json(
                            404,
                            {
                                "error": {
                                    "message": "no such batch",
                                    "type": "invalid_request_error",
                                }
                            },
                        )
                    with server.lock:
                        b.polls += 1
                        server.stats["polls"] += 1
                    return self._json(200, server._openai_batch(b))
                if m := re.fullmatch(r"/v1/files/([^/]+)/content", path):
                    server.stats["results"] += 1
                    return self._send(200, server.files[m.group(1)], "application/octet-stream")
                self._json(404, {"error": {"message": f"no route {path}"}})

            def do_POST(self) -> None:
                path = self.path.split("?")[0]
                raw = self._body()
                if self._fault(path):
                    return
                if path == "/v1/messages/batches":
                    body = json.loads(raw)
                    b = server._new_batch("anthropic", body["requests"])
                    return self._json(200, server._anthropic_batch(b))
                if path == "/v1/files":
                    content = _multipart_file(self.headers.get("content-type", ""), raw)
                    fid = "file-" + uuid.uuid4().hex[:20]
                    server.files[fid] = content
                    server.stats["uploads"] += 1
                    return self._json(
                        200,
                        {
                            "id": fid,
                            "object": "file",
                            "bytes": len(content),
                            "created_at": int(time.time()),
                            "filename": "batch.jsonl",
                            "purpose": "batch",
                            "status": "processed",
                        },
                    )
                if path == "/v1/batches":
                    body = json.loads(raw)
                    lines = server.files[body["input_file_id"]].decode("utf-8").splitlines()
                    reqs = [json.loads(x) for x in lines if x.strip()]
                    b = server._new_batch("openai", reqs)
                    b.input_file_id = body["input_file_id"]
                    return self._json(200, server._openai_batch(b))
                self._json(404, {"error": {"message": f"no route {path}"}})

        return Handler


def _multipart_file(content_type: str, raw: bytes) -> bytes:
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if not m:
        raise ValueError("no multipart boundary")
    boundary = b"--" + m.group(1).encode()
    for part in raw.split(boundary):
        head, _, body = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return body[:-2] if body.endswith(b"\r\n") else body
    raise ValueError("no file part")
