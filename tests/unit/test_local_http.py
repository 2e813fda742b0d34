"""The three local servers answer only to their own loopback Host, send a CSP with
``frame-ancestors 'none'`` and refuse cross-site state changes (app/local_http.py).

Before: ``curl -H "Host: evil.test:PORT" http://127.0.0.1:PORT/`` got 200 from ``rag view``
(a DNS-rebinding page read the run list and the prompts as sent); the editor's check let
``127.0.0.1:PORT.evil.test`` through; no server forbade framing; the local model server
took a cross-site ``text/plain`` POST with any Host.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.local_http import cross_site, host_ok

FOREIGN_HOSTS = [
    "evil.test:{port}",
    "127.0.0.1:{port}.evil.test",
    "127.0.0.1.evil.test:{port}",
    "localhost.evil.test:{port}",
    "127.0.0.1:{other}",
    "127.0.0.1",
    "",
]


def request(
    port: int,
    method: str,
    path: str,
    *,
    host: str | None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly this Host header (None: no Host header at all)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    if host is not None:
        conn.putheader("Host", host)
    for name, value in (headers or {}).items():
        conn.putheader(name, value)
    if body is not None:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def _foreign(port: int) -> list[str | None]:
    return [h.format(port=port, other=port + 1) for h in FOREIGN_HOSTS] + [None]


def _framing_forbidden(headers: dict[str, str]) -> None:
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"


def test_the_rules() -> None:
    assert host_ok("127.0.0.1:8765", 8765) and host_ok("localhost:8765", 8765)
    assert not host_ok("127.0.0.1:8765.evil.test", 8765)
    assert not host_ok("evil.test:8765", 8765) and not host_ok(None, 8765)
    json_body = {"Content-Type": "application/json"}
    assert cross_site(json_body, 1) is None  # a program: no Origin
    assert cross_site({**json_body, "Origin": "http://127.0.0.1:1"}, 1) is None
    assert cross_site({**json_body, "Origin": "http://evil.test"}, 1) is not None
    assert cross_site({**json_body, "Origin": "null"}, 1) is not None
    assert cross_site({**json_body, "Sec-Fetch-Site": "cross-site"}, 1) is not None
    assert cross_site({"Content-Type": "text/plain"}, 1) is not None  # no preflight needed


def test_the_viewer(tmp_path: Path) -> None:
    from app.view.server import serve_in_thread

    server, _ = serve_in_thread(tmp_path)
    port = int(server.server_address[1])
    try:
        status, headers, body = request(port, "GET", "/", host=f"127.0.0.1:{port}")
        assert status == 200 and b"<html" in body
        _framing_forbidden(headers)
        assert request(port, "GET", "/", host=f"localhost:{port}")[0] == 200
        for host in _foreign(port):
            status, headers, body = request(port, "GET", "/", host=host)
            assert status == 403 and b"wrong host" in body, host
            _framing_forbidden(headers)
        # nothing changes state here: a POST is not served at all
        assert request(port, "POST", "/", host=f"127.0.0.1:{port}", body=b"x")[0] >= 400
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def editor(tmp_path: Path) -> Iterator[int]:
    from app.eval.datasets.editor import EditorState
    from app.eval.datasets.editor_http import make_server
    from app.retrieval.kb import load_kb
    from tests.unit.datasets._datasets_support import DATASETS, KB_ROOT

    folder = tmp_path / "datasets"
    folder.mkdir()
    shutil.copy(DATASETS / "smoke_v1.0.jsonl", folder / "smoke_v1.0.jsonl")
    shutil.copy(DATASETS / "CHANGELOG.md", folder / "CHANGELOG.md")
    server = make_server(EditorState(folder=folder, kb=load_kb(KB_ROOT), lang="en", who="t"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_the_editor(editor: int) -> None:
    port = editor
    own = f"127.0.0.1:{port}"
    status, headers, _ = request(port, "GET", "/api/suites", host=own)
    assert status == 200
    _framing_forbidden(headers)
    assert "connect-src 'self'" in headers["content-security-policy"]
    for host in _foreign(port):
        status, headers, _ = request(port, "GET", "/api/suites", host=host)
        assert status == 403, host
        _framing_forbidden(headers)
    body = json.dumps({"suite": "smoke", "cases": []}).encode()
    page = {"Content-Type": "application/json", "X-Rag-Editor": "1"}
    assert request(port, "POST", "/api/validate", host=own, body=body, headers=page)[0] == 200
    same = {**page, "Origin": f"http://{own}", "Sec-Fetch-Site": "same-origin"}
    assert request(port, "POST", "/api/validate", host=own, body=body, headers=same)[0] == 200
    refused = [
        {**page, "Origin": "http://evil.test"},
        {**page, "Sec-Fetch-Site": "cross-site"},
        {**page, "Content-Type": "text/plain"},
        {"Content-Type": "application/json"},  # not the editor's page (no X-Rag-Editor)
    ]
    for headers in refused:
        status, _, _ = request(port, "POST", "/api/save", host=own, body=body, headers=headers)
        assert status == 403, headers
    for host in _foreign(port):
        status, _, _ = request(port, "POST", "/api/save", host=host, body=body, headers=page)
        assert status == 403, host


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local_model_ready() -> bool:
    from app.errors import ConfigError
    from app.llm.local_server import gguf_path, node_binary, server_script

    try:
        node_binary(), server_script(), gguf_path()
    except ConfigError:
        return False
    return True


@pytest.mark.skipif(not _local_model_ready(), reason="node, node-llama-cpp or the model missing")
def test_the_local_model_server() -> None:
    """Only requests that are refused are sent: no generation runs."""
    from app.llm.local_server import LocalModelServer

    port = _free_port()
    own = f"127.0.0.1:{port}"
    with LocalModelServer(port):
        status, headers, body = request(port, "GET", "/v1/models", host=own)
        assert status == 200 and b"smollm2" in body
        _framing_forbidden(headers)
        # node itself answers 400 to an HTTP/1.1 request without a Host
        expected = {host: (400,) if host is None else (403,) for host in _foreign(port)}
        for host, codes in expected.items():
            assert request(port, "GET", "/v1/models", host=host)[0] in codes, host
        chat = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        path = "/v1/chat/completions"
        as_json = {"Content-Type": "application/json"}
        for host, codes in expected.items():
            status, _, _ = request(port, "POST", path, host=host, body=chat, headers=as_json)
            assert status in codes, host
        # what a page elsewhere can send without a preflight, or says it is
        for headers in (
            {"Content-Type": "text/plain"},
            {**as_json, "Origin": "http://evil.test"},
            {**as_json, "Sec-Fetch-Site": "cross-site"},
        ):
            status, _, _ = request(port, "POST", path, host=own, body=chat, headers=headers)
            assert status in (403, 415), headers
