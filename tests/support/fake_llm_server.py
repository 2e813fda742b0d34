"""A real HTTP server on 127.0.0.1 speaking the OpenAI and Anthropic wire formats.

    POST /v1/chat/completions     OpenAI chat completions (openai_base_url = <url>/v1)
    POST /v1/messages             Anthropic messages      (anthropic_base_url = <url>)
    GET  /_stats                  {"requests", "peak_in_flight", "in_flight"} as JSON
    POST /_reset                  zero the counters

Answers are scripted (:meth:`FakeLLMServer.script`, consumed first-in first-out by any
request) or come from ``responder(body) -> str`` (default: ``"echo: <last user text>"``).
Faults: 429 with ``Retry-After``, any status, a hang past the client's timeout, a
malformed JSON body, a dropped connection, and the 200 replies that are not a usable
completion (:func:`bad_body`: an HTML page, an empty body, a cut body, no choices, a
``null`` message, a wrong content type, …), and overload (``capacity=N``: a request beyond
N in flight gets a 429, which is what adaptive concurrency must cope with). A ``chooser(n, body) -> Action | None`` picks an
action per request when the script is empty (the seeded fault mix of
:mod:`tests.support.chaos_server` is one). Every response carries a request id
(``x-request-id`` and ``request-id``: ``req_<n>``). ``latency_s`` delays every answer.

Used in-process by the fixtures (a thread) and out-of-process by the benchmark::

    python tests/support/fake_llm_server.py --latency 0.2    # prints "READY <port>"
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Action:
    """One scripted response: ``reply`` / ``status`` / ``hang`` / ``malformed`` / ``drop``."""

    kind: str = "reply"
    text: str | None = None
    body: bytes | None = None  # for "raw": sent as is with content_type
    content_type: str = "application/json"
    status: int = 200
    retry_after: float | None = None
    seconds: float = 30.0  # for hang
    echo_auth: bool = False  # error body quotes the credentials received (as some APIs do)


#: a valid JSON reply whose content ends in an escaped lone surrogate (``"…[1] \ud800"``,
#: what a model that broke a surrogate pair sends): ``json.dumps`` writes it as that escape
LONE_SURROGATE_REPLY = "根据参考资料，年假为 5 天 [1] \ud800"


def reply(text: str) -> Action:
    return Action("reply", text=text)


def status(code: int, retry_after: float | None = None, *, echo_auth: bool = False) -> Action:
    return Action("status", status=code, retry_after=retry_after, echo_auth=echo_auth)


def rate_limited(retry_after: float = 1.0) -> Action:
    return status(429, retry_after)


def server_error(code: int = 500) -> Action:
    return status(code)


def hang(seconds: float = 30.0) -> Action:
    return Action("hang", seconds=seconds)


def malformed() -> Action:
    return Action("malformed")


def drop() -> Action:
    return Action("drop")


def raw(body: bytes, content_type: str = "application/json", code: int = 200) -> Action:
    """A reply sent byte for byte (HTTP ``code``, ``content_type``)."""
    return Action("raw", body=body, content_type=content_type, status=code)


_HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
#: 200 replies that are not a usable completion, by name, for both wire formats:
#: (openai body, anthropic body, content type)
BAD_BODIES: dict[str, tuple[bytes, bytes, str]] = {
    "html": (_HTML, _HTML, "text/html; charset=utf-8"),
    "html_as_json": (_HTML, _HTML, "application/json"),
    "empty": (b"", b"", "application/json"),
    "cut_json": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess',
        b'{"id": "x", "type": "message", "content": [{"type": "te',
        "application/json",
    ),
    "not_an_object": (b'["a list"]', b'"a string"', "application/json"),
    "no_choices": (
        b'{"id": "x", "object": "chat.completion", "choices": []}',
        b'{"id": "x", "type": "message", "role": "assistant", "content": []}',
        "application/json",
    ),
    "null_choices": (
        b'{"id": "x", "object": "chat.completion", "choices": null}',
        b'{"id": "x", "type": "message", "role": "assistant", "content": null}',
        "application/json",
    ),
    "null_message": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": null,'
        b' "finish_reason": "stop"}]}',
        b'{"id": "x", "type": "message", "role": "assistant", "content": [{"type": "text",'
        b' "text": null}], "stop_reason": "end_turn"}',
        "application/json",
    ),
    "null_content": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message":'
        b' {"role": "assistant", "content": null}, "finish_reason": "stop"}]}',
        b'{"id": "x", "type": "message", "role": "assistant", "content": [{"type": "tool_use",'
        b' "id": "t", "name": "f", "input": {}}], "stop_reason": "end_turn"}',
        "application/json",
    ),
    "wrong_content_type": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message":'
        b' {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}',
        b'{"id": "x", "type": "message", "role": "assistant", "content": [{"type": "text",'
        b' "text": "hi"}], "stop_reason": "end_turn"}',
        "text/plain",
    ),
    "error_object": (
        b'{"error": {"message": "upstream overloaded", "type": "server_error"}}',
        b'{"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}}',
        "application/json",
    ),
}


def bad_body(name: str) -> Action:
    """A 200 reply that is not a usable completion (a key of :data:`BAD_BODIES`)."""
    return Action("bad_body", text=name)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)


def _last_user_text(body: Any) -> str:
    for message in reversed(body.get("messages", []) if isinstance(body, dict) else []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content)
            return str(content)
    return ""


def default_responder(body: Any) -> str:
    return "echo: " + _last_user_text(body)


def bench_responder(body: Any) -> str:
    """The benchmark's replies: a judge score as JSON to a request that asks for one (its
    text names ``"score"``), else a short answer citing document [1]."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    texts = [str(body.get("system", "")) if isinstance(body, dict) else ""]
    texts += [str(m.get("content", "")) for m in messages if isinstance(m, dict)]
    if any('"score"' in t for t in texts):
        return '{"score": 4, "reasoning": "supported by the documents"}'
    return "According to the documents, the answer is in the first one [1]."


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a timeout, a killed run) is expected here, not news."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeLLMServer:
    """Start with ``with FakeLLMServer(latency_s=0.2) as server:`` or ``.start()``."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        responder: Callable[[Any], str] = default_responder,
        port: int = 0,
        chooser: Callable[[int, Any], Action | None] | None = None,
        capacity: int | None = None,
        capacity_retry_after: float = 0.2,
    ) -> None:
        self.latency_s = latency_s
        self.responder = responder
        self.chooser = chooser
        #: an overloaded server: a request beyond ``capacity`` in flight gets a 429
        self.capacity = capacity
        self.capacity_retry_after = capacity_retry_after
        self.overload_429s = 0
        self._port = port
        self._script: collections.deque[Action] = collections.deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._seen_systems: set[str] = set()
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.received: list[Received] = []

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        self._httpd = _HTTPServer(("127.0.0.1", self._port), self._handler_class())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # -- scripting and counters ------------------------------------------------------
    def script(self, *actions: Action | str) -> None:
        """Queue responses (a str is a reply); unscripted requests use the responder."""
        with self._lock:
            self._script.extend(reply(a) if isinstance(a, str) else a for a in actions)

    def reset(self) -> None:
        with self._lock:
            self.requests = 0
            self.peak_in_flight = self.in_flight
            self.received.clear()
            self._script.clear()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.requests,
                "peak_in_flight": self.peak_in_flight,
                "in_flight": self.in_flight,
            }

    def _next_action(self) -> Action | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    def _enter(self, received: Received) -> int:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.received.append(received)
            return self.requests

    def _over_capacity(self) -> bool:
        with self._lock:
            if self.capacity is None or self.in_flight <= self.capacity:
                return False
            self.overload_429s += 1
            return True

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _cache_tokens(self, system: Any) -> tuple[int, int]:
        """(cache_write, cache_read) for an Anthropic system block with cache_control."""
        if not isinstance(system, list):
            return 0, 0
        cached = [b.get("text", "") for b in system if b.get("cache_control")]
        if not cached:
            return 0, 0
        key = "\n".join(cached)
        size = max(1, len(key.split()))
        with self._lock:
            if key in self._seen_systems:
                return 0, size
            self._seen_systems.add(key)
            return size, 0

    # -- HTTP ------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else Nagle + delayed ACK add ~40 ms per answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(
                self,
                code: int,
                payload: bytes,
                headers: dict[str, str],
                content_type: str = "application/json",
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self._headers_buffer.append(b"\r\n" + payload)  # one write: head + body
                self.flush_headers()

            def do_GET(self) -> None:
                if self.path == "/_stats":
                    self._send(200, json.dumps(server.stats()).encode(), {})
                else:
                    self._send(404, b'{"error": {"message": "not found"}}', {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path == "/_reset":
                    server.reset()
                    self._send(200, b"{}", {})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                n = server._enter(Received(self.path, headers, body))
                try:
                    self._serve(n, body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                finally:
                    server._leave()

            def _serve(self, n: int, body: Any) -> None:
                fmt = "anthropic" if self.path.rstrip("/").endswith("/messages") else "openai"
                if self.path.rstrip("/") not in ("/v1/messages", "/v1/chat/completions"):
                    self._send(404, b'{"error": {"message": "unknown path"}}', {})
                    return
                rid = f"req_{n}"
                ids = {"x-request-id": rid, "request-id": rid}
                action = server._next_action()
                overloaded = action is None and server._over_capacity()
                if overloaded:  # answered at once, as an overloaded API does
                    action = rate_limited(server.capacity_retry_after)
                if action is None and server.chooser is not None:
                    action = server.chooser(n, body)
                action = action or Action("reply")
                # a 429 is answered at once, as a rate limiter does; everything else waits
                fast = action.kind == "status" and action.status == 429
                if server.latency_s and not fast:
                    server._stop.wait(server.latency_s)
                if action.kind == "hang":
                    server._stop.wait(action.seconds)
                if action.kind == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action.kind == "malformed":
                    self._send(200, b'{"id": "broken", "choices": [', ids)
                    return
                if action.kind == "raw":
                    self._send(action.status, action.body or b"", ids, action.content_type)
                    return
                if action.kind == "bad_body":
                    openai_body, anthropic_body, ctype = BAD_BODIES[action.text or ""]
                    payload = anthropic_body if fmt == "anthropic" else openai_body
                    self._send(200, payload, ids, ctype)
                    return
                if action.kind == "status":
                    extra = dict(ids)
                    if action.retry_after is not None:
                        extra["retry-after"] = f"{action.retry_after:g}"
                    echo = ""
                    if action.echo_auth:
                        echo = " credentials: " + " ".join(
                            self.headers.get(h, "") for h in ("authorization", "x-api-key")
                        )
                    self._send(action.status, _error_body(fmt, action.status, echo), extra)
                    return
                if not isinstance(body, dict):
                    self._send(400, _error_body(fmt, 400), ids)
                    return
                text = action.text if action.text is not None else server.responder(body)
                payload = (
                    _anthropic_body(server, body, text, rid)
                    if fmt == "anthropic"
                    else _openai_body(body, text, rid)
                )
                self._send(200, json.dumps(payload).encode(), ids)

        return Handler


def _count(text: str) -> int:
    return max(1, len(text.split()))


def _error_body(fmt: str, code: int, echo: str = "") -> bytes:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
    }.get(code, "api_error")
    message = f"fake server: injected HTTP {code}{echo}"
    if fmt == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()


def _openai_body(body: dict[str, Any], text: str, rid: str) -> dict[str, Any]:
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    p, c = _count(prompt), _count(text)
    return {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": p,
            "completion_tokens": c,
            "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


def _anthropic_body(
    server: FakeLLMServer, body: dict[str, Any], text: str, rid: str
) -> dict[str, Any]:
    write, read = server._cache_tokens(body.get("system"))
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    return {
        "id": f"msg_{rid}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": _count(prompt),
            "output_tokens": _count(text),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        },
    }


class FakeServerProcess:
    """This server in a process of its own (``python fake_llm_server.py``), for the benchmarks:
    their client must not share the server's GIL. Stopped by closing its stdin."""

    def __init__(self, latency: float = 0.0, responder: str = "echo") -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--latency", str(latency)]
        self.proc = subprocess.Popen(
            [*cmd, "--responder", responder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "READY":
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise RuntimeError("the fake LLM server did not start")
        self.url = f"http://127.0.0.1:{line[1]}"

    def _call(self, path: str, data: bytes | None = None) -> dict[str, int]:
        import urllib.request

        req = urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")
        with urllib.request.urlopen(req, timeout=10) as r:
            out: dict[str, int] = json.loads(r.read() or b"{}")
        return out

    def stats(self) -> dict[str, int]:
        """``/_stats``: requests, peak_in_flight, in_flight."""
        return self._call("/_stats")

    def reset(self) -> None:
        self._call("/_reset", b"{}")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument(
        "--responder", choices=["echo", "bench"], default="echo", help="echo, or bench_responder"
    )
    args = parser.parse_args(argv)
    responder = bench_responder if args.responder == "bench" else default_responder
    server = FakeLLMServer(latency_s=args.latency, port=args.port, responder=responder).start()
    print(f"READY {server.port}", flush=True)
    try:
        sys.stdin.read()  # runs until stdin closes (the parent exits or closes the pipe)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
