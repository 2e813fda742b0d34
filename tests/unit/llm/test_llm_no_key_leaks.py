"""A planted fake key appears nowhere a run writes: cache, logs, errors, reprs, stats."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from app.errors import ProviderError
from app.llm.engine import Engine
from app.llm.providers.families import parse_provider
from tests.support.fake_llm_server import (
    FakeLLMServer,
    drop,
    hang,
    malformed,
    rate_limited,
    server_error,
    status,
)
from tests.unit.llm.helpers import chat


async def test_planted_keys_never_leak(
    fake_llm_server: FakeLLMServer,
    engine_factory: Callable[..., Engine],
    planted_keys: dict[str, str],
    isolated_cache: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log_file = tmp_path / "logs" / "run.log"
    log_file.parent.mkdir()
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    try:
        engine = engine_factory(timeout_s=0.5, max_attempts=2)
        providers = [
            f"openai:gpt-4o-mini@{fake_llm_server.openai_base_url}",
            "anthropic:claude-sonnet-4-6",
        ]
        for provider in providers:
            fake_llm_server.script(
                status(401, echo_auth=True),
                status(400, echo_auth=True),
                rate_limited(0.01),
                server_error(500),
                malformed(),
                hang(5),
                drop(),
            )
            for i in range(6):
                try:
                    completion = await engine.generate(provider, chat(f"q{i}"))
                    texts += [repr(completion), completion.text]
                except ProviderError as exc:
                    texts += [str(exc), repr(exc), repr(vars(exc)), repr(exc.__context__)]
            texts.append(repr(await engine.generate(provider, chat("ok"))))
            texts.append(repr(engine.provider(parse_provider(provider))))
        texts += [repr(engine), repr(engine.stats), repr(engine.config)]
        # the server did receive the keys (the test would prove nothing otherwise)
        sent = " ".join(str(r.headers) for r in fake_llm_server.received)
        assert planted_keys["OPENAI_API_KEY"] in sent
        assert planted_keys["ANTHROPIC_API_KEY"] in sent
        await engine.aclose()
    finally:
        root.removeHandler(handler)
        handler.close()

    assert any("credentials" in t for t in texts), "the echoing error bodies were seen"
    written = [p.read_bytes() for p in isolated_cache.rglob("*") if p.is_file()]
    assert written, "the run wrote a cache"
    haystacks = {
        **{f"cache file {i}": blob for i, blob in enumerate(written)},
        "log file": log_file.read_bytes(),
        "captured logs": caplog.text.encode(),
        "errors, reprs, stats": "\n".join(texts).encode(),
    }
    for key in planted_keys.values():
        for secret in (key, key[-12:]):
            for where, blob in haystacks.items():
                at = blob.find(secret.encode())
                assert at < 0, f"{secret!r} leaked into {where}: {blob[at - 200 : at + 50]!r}"
