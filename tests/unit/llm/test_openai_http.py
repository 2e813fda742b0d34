"""``openai:<model>`` over plain HTTP (httpx2, the SDK's transport) instead of the SDK.

The oracle for the wire request is the official ``openai`` SDK itself: the same request sent
through ``AsyncOpenAI`` reaches the fake server with the same path, JSON body and
authentication headers (``Authorization``, ``OpenAI-Organization``, ``OpenAI-Project``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app.errors import ProviderError
from app.llm.engine import Engine
from app.llm.providers.openai import OpenAIProvider
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.fixtures import PLANTED_OPENAI_KEY
from tests.unit.llm.helpers import chat

ROOT = Path(__file__).resolve().parents[3]
AUTH_HEADERS = ("authorization", "openai-organization", "openai-project")

pytestmark = pytest.mark.usefixtures("planted_keys")


async def test_the_wire_request_is_the_sdks(
    fake_llm_server: FakeLLMServer,
    engine_factory: Callable[..., Engine],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import openai

    monkeypatch.setenv("OPENAI_ORG_ID", "org-wire-test")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj_wire_test")
    url = fake_llm_server.openai_base_url
    request = chat("年假有几天？", max_tokens=40, stop=("###",), response_format="json")
    fake_llm_server.script("ours")
    await engine_factory(cache=False).generate(f"openai:gpt-4o-mini@{url}", request)
    ours = fake_llm_server.received[-1]

    body = OpenAIProvider.payload(request, model="gpt-4o-mini", base_url=url)
    fake_llm_server.script("sdk")
    client = openai.AsyncOpenAI(base_url=url, max_retries=0)  # key, org, project from env
    try:
        await client.chat.completions.create(**body)
    finally:
        await client.close()
    sdk = fake_llm_server.received[-1]

    assert ours.path == sdk.path == "/v1/chat/completions"
    assert ours.body == sdk.body
    assert {h: ours.headers.get(h) for h in AUTH_HEADERS} == {
        h: sdk.headers.get(h) for h in AUTH_HEADERS
    }
    assert ours.headers["authorization"] == f"Bearer {PLANTED_OPENAI_KEY}"
    assert ours.headers["openai-project"] == "proj_wire_test"
    assert ours.headers["content-type"].startswith("application/json")


def test_a_chat_call_does_not_import_the_sdk(
    fake_llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    # the SDK's ≈ 700 response models were start-up cost only: the reply is read raw
    fake_llm_server.script("fine")
    code = (
        "import asyncio, sys\n"
        "from app.llm.engine import Engine, EngineConfig\n"
        "from app.llm.types import ChatRequest, Message\n"
        "async def main():\n"
        "    engine = Engine(EngineConfig(cache=False, timeout_s=10.0))\n"
        "    request = ChatRequest(model='m', system=None, messages=(Message('user', 'q'),))\n"
        f"    c = await engine.generate('openai:gpt-4o-mini@{fake_llm_server.openai_base_url}', request)\n"
        "    await engine.aclose()\n"
        "    return c.text\n"
        "text = asyncio.run(main())\n"
        "print(text, 'openai' in sys.modules, 'httpx2' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out == ["fine", "False", "True"]
    assert fake_llm_server.requests == 1


async def test_a_refused_connection_is_a_retryable_connection_failure(
    engine_factory: Callable[..., Engine],
) -> None:
    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = engine_factory(cache=False, max_attempts=2)
    with pytest.raises(ProviderError) as caught:
        await engine.generate(f"openai:gpt-4o-mini@http://127.0.0.1:{port}/v1", chat())
    assert "connection failed" in str(caught.value) and caught.value.retryable
    assert engine.stats.retries == 1  # retried once, as the SDK's APIConnectionError was
    assert PLANTED_OPENAI_KEY not in str(caught.value)
