"""Provider batch APIs behind the engine, against a local fake speaking both APIs' shapes
through the official SDKs: one batch for many calls, results in the cache, batch prices,
partial failures, expiry with resubmission, and re-attaching after a restart."""

from __future__ import annotations

import asyncio
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from app.errors import MalformedReply, ProviderError
from app.llm.batch import BatchConfig, Batcher
from app.llm.engine import Engine, EngineConfig
from app.llm.pricing import PRICES_FILE
from app.llm.retry import RetryPolicy
from app.llm.types import ChatRequest, Completion, Message
from tests.support.fake_batch_server import FakeBatchServer

FAST = {"flush_idle_s": 0.05, "poll_initial_s": 0.01, "poll_factor": 1.0, "poll_max_s": 0.01}


def _req(i: int) -> ChatRequest:
    return ChatRequest(
        model="m", system="你是助手", messages=(Message("user", f"问题 {i}"),), max_tokens=64
    )


@pytest.fixture(params=["openai", "anthropic"])
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return str(request.param)


def _provider(api: str, server: FakeBatchServer, monkeypatch: pytest.MonkeyPatch) -> str:
    if api == "openai":
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch-0000")
        return f"openai:gpt-4o-mini@{server.url}/v1"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-batch-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    return "anthropic:claude-haiku-4-5"


def _engine(tmp: Path, **batch: Any) -> Engine:
    return Engine(
        EngineConfig(cache_path=tmp / "responses.sqlite3", concurrency=4),
        batcher=Batcher(BatchConfig(state_path=tmp / "batches.sqlite3", **{**FAST, **batch})),
    )


async def _run(engine: Engine, provider: str, n: int) -> list[Any]:
    try:
        return await asyncio.gather(
            *(engine.generate(provider, _req(i)) for i in range(n)), return_exceptions=True
        )
    finally:
        await engine.aclose()


def _list_price(api: str, model: str) -> dict[str, float]:
    data = tomllib.loads(PRICES_FILE.read_text("utf-8"))
    return {k: float(v) for k, v in data[api][model].items()}


async def test_many_calls_become_one_batch_at_half_price(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeBatchServer(polls_to_end=3) as server:
        provider = _provider(api, server, monkeypatch)
        engine = _engine(tmp_path)
        results = await _run(engine, provider, 25)
        assert server.stats["batches"] == 1 and server.stats["requests"] == 25
        assert server.stats["polls"] >= 3
        assert [r.text for r in results] == [f"echo: 问题 {i}" for i in range(25)]
        # the price: list price × 0.5, computed here from prices.toml by hand
        model = provider.split(":", 1)[1].split("@")[0]
        price = _list_price(api, model)
        for r in results:
            u = r.usage
            list_cost = (u.input_tokens * price["input"] + u.output_tokens * price["output"]) / 1e6
            assert r.cost_usd == pytest.approx(0.5 * list_cost, rel=1e-9)
        assert engine.stats.calls == 25 and engine.stats.errors == 0

    # the results are in the response cache: a run without a batcher pays nothing
    plain = Engine(EngineConfig(cache_path=tmp_path / "responses.sqlite3"))
    try:
        again = await plain.generate(provider, _req(3))
    finally:
        await plain.aclose()
    assert again.cached and again.text == "echo: 问题 3" and plain.stats.calls == 0


async def test_a_failed_request_is_that_call_s_error_the_rest_succeed(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad: set[str] = set()

    def errored(custom_id: str) -> bool:
        if len(bad) < 3 and custom_id not in bad:
            bad.add(custom_id)
        return custom_id in bad

    with FakeBatchServer(errored=errored) as server:
        provider = _provider(api, server, monkeypatch)
        results = await _run(_engine(tmp_path), provider, 10)
        failures = [r for r in results if isinstance(r, BaseException)]
        assert len(failures) == 3 and all(isinstance(f, ProviderError) for f in failures)
        assert all("fake: bad request" in str(f) for f in failures)
        assert server.stats["batches"] == 1  # an invalid request is not resubmitted
        assert sum(1 for r in results if not isinstance(r, BaseException)) == 7


async def test_an_expired_batch_resubmits_only_what_did_not_run(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeBatchServer(expire_first=1, expire_keep=4) as server:
        provider = _provider(api, server, monkeypatch)
        results = await _run(_engine(tmp_path), provider, 12)
        assert not [r for r in results if isinstance(r, BaseException)]
        assert server.stats["batches"] == 2 and server.stats["requests"] == 12 + 8


async def test_expired_twice_is_an_error_not_a_loop(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeBatchServer(expire_first=10, expire_keep=0) as server:
        provider = _provider(api, server, monkeypatch)
        results = await _run(_engine(tmp_path, max_rounds=2), provider, 3)
        assert all(isinstance(r, ProviderError) for r in results)
        assert server.stats["batches"] == 2


async def test_a_restarted_process_reattaches_to_the_running_batch(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeBatchServer(polls_to_end=10**9) as server:
        provider = _provider(api, server, monkeypatch)
        first = _engine(tmp_path)
        tasks = [asyncio.create_task(first.generate(provider, _req(i))) for i in range(6)]
        for _ in range(500):  # until the batch is submitted and polled once
            if server.stats["polls"] >= 1:
                break
            await asyncio.sleep(0.01)
        assert server.stats["batches"] == 1
        for t in tasks:  # the process "dies": its waiting calls are gone
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await first.aclose()

        server.polls_to_end = 0  # the provider finishes the batch meanwhile
        second = _engine(tmp_path)
        results = await _run(second, provider, 6)
        assert [r.text for r in results] == [f"echo: 问题 {i}" for i in range(6)]
        assert server.stats["batches"] == 1 and server.stats["requests"] == 6  # nothing twice
        assert second.batcher is not None and second.batcher.stats.reattached == 6


HTML = "<html><body><h1>502 Bad Gateway</h1></body></html>"


def _live_error(api: str, body: bytes) -> str:
    """What the live replies' parser says of the same body (an HTTP 200 reply)."""
    from types import SimpleNamespace

    from app.llm.providers.replies import anthropic_completion, openai_completion

    parse = openai_completion if api == "openai" else anthropic_completion
    with pytest.raises(MalformedReply) as caught:
        parse(SimpleNamespace(headers={}, content=body), label="live", model="m")
    return str(caught.value).split("unusable 200 reply: ", 1)[1].split("; body starts")[0]


async def test_a_malformed_batch_result_is_the_live_reply_s_error(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    # request -> what its result holds instead of the reply: an HTML page, a null message
    null_message: dict[str, Any] = (
        {"id": "chatcmpl-x", "choices": [{"index": 0, "message": None}]}
        if api == "openai"
        else {"id": "msg_x", "type": "message", "content": None}
    )
    garbled: dict[str, object] = {}

    def garble(custom_id: str, reply: dict[str, Any]) -> object:
        if custom_id not in garbled and len(garbled) < 2:
            garbled[custom_id] = HTML if not garbled else null_message
        return garbled.get(custom_id, reply)

    # and a line of the results file that is no JSON at all (it names no request)
    with FakeBatchServer(garble=garble, extra_lines=(HTML,)) as server:
        provider = _provider(api, server, monkeypatch)
        # bounded: a results reader that raised anything but a ProviderError left the calls
        # waiting for ever
        results = await asyncio.wait_for(_run(_engine(tmp_path, max_rounds=1), provider, 6), 60)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 2 and sum(isinstance(r, Completion) for r in results) == 4
    for failure in failures:  # the live path's type: a retryable 200 that is no completion
        assert type(failure) is MalformedReply and failure.retryable and failure.status == 200
    said = {str(f) for f in failures}
    for reply in garbled.values():
        body = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
        what = _live_error(api, body)
        assert any(what in text for text in said), (what, said)
    assert "body is not JSON" in _live_error(api, HTML.encode())  # the HTML page's reason


@pytest.mark.parametrize("step", ["submit", "status", "results"])
async def test_an_unexpected_error_in_a_batch_step_fails_its_calls_instead_of_hanging(
    step: str, api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug or an unwrapped client error (anything but a ProviderError) in submit, status or
    results killed the flusher/poller task and left every call of the batch waiting for ever."""
    from app.llm.batch.apis import AnthropicBatches, OpenAIBatches

    async def broken(self: object, *args: object) -> object:
        raise KeyError("id")  # e.g. a reply shape the adapter did not expect

    monkeypatch.setattr(OpenAIBatches if api == "openai" else AnthropicBatches, step, broken)
    with FakeBatchServer() as server:
        provider = _provider(api, server, monkeypatch)
        results = await asyncio.wait_for(_run(_engine(tmp_path), provider, 3), 30)
    assert all(type(r) is ProviderError for r in results), results
    said = str(results[0])
    assert f"batch {step}" in said and "KeyError" in said, said


@pytest.mark.parametrize("method", ["record_submitted", "items_of"])
async def test_a_failing_batch_store_fails_the_calls_instead_of_hanging(
    method: str, api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch store (SQLite) raising — a locked or full disk — after the submit killed the
    flusher (``record_submitted``) or the poller (``items_of``) and left every call waiting."""
    import sqlite3

    from app.llm.batch.store import BatchStore

    def broken(self: object, *args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(BatchStore, method, broken)
    with FakeBatchServer() as server:
        provider = _provider(api, server, monkeypatch)
        results = await asyncio.wait_for(_run(_engine(tmp_path), provider, 3), 30)
    assert all(type(r) is ProviderError for r in results), results
    said = str(results[0])
    assert "batch store" in said and "database or disk is full" in said, said
    assert re.search(r"batch (msg)?batch_\w+ ", said), said  # names the batch


RETRY_FAST = {"retry": RetryPolicy(base_delay_s=0.001, max_delay_s=0.001)}


async def test_a_result_download_that_fails_once_is_retried_not_resubmitted(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One 500 while downloading the results failed every case of the batch, marked it
    failed, and the rerun submitted (and paid) it again."""
    with FakeBatchServer(fail_results=1) as server:
        provider = _provider(api, server, monkeypatch)
        results = await asyncio.wait_for(_run(_engine(tmp_path, **RETRY_FAST), provider, 5), 30)
        assert [getattr(r, "text", r) for r in results] == [f"echo: 问题 {i}" for i in range(5)]
        assert server.stats["batches"] == 1 and server.stats["requests"] == 5
        assert server.fail_results == 0  # the failing download was asked, then retried


async def test_results_that_cannot_be_downloaded_stay_for_resume(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeBatchServer(fail_results=100) as server:
        provider = _provider(api, server, monkeypatch)
        first = await asyncio.wait_for(_run(_engine(tmp_path, **RETRY_FAST), provider, 4), 30)
        assert all(type(r) is ProviderError for r in first), first
        said = str(first[0])
        assert "results could not be downloaded" in said and "--resume" in said, said
        server.fail_results = 0  # the provider serves the results again: a rerun collects them
        again = _engine(tmp_path, **RETRY_FAST)
        results = await asyncio.wait_for(_run(again, provider, 4), 30)
        assert [getattr(r, "text", r) for r in results] == [f"echo: 问题 {i}" for i in range(4)]
        assert server.stats["batches"] == 1 and server.stats["requests"] == 4  # paid once
        assert again.batcher is not None and again.batcher.stats.reattached == 4


async def test_a_batch_that_never_ends_stops_at_its_bound_with_progress(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    with FakeBatchServer(polls_to_end=10**9) as server:
        provider = _provider(api, server, monkeypatch)
        engine = _engine(tmp_path, deadline_s=0.3, **RETRY_FAST)
        assert engine.batcher is not None
        engine.batcher.progress = lines.append
        results = await asyncio.wait_for(_run(engine, provider, 3), 30)
    assert all(type(r) is ProviderError for r in results), results
    said = str(results[0])
    assert "did not end within --batch-timeout 0.3 s" in said and "--resume" in said, said
    assert lines and all(line.startswith("batch ") for line in lines)
    assert any("in_progress" in line or "validating" in line for line in lines), lines
    assert server.stats["batches"] == 1


async def test_a_provider_that_stops_answering_is_reported(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    with FakeBatchServer(polls_to_end=10**9) as server:
        provider = _provider(api, server, monkeypatch)
        engine = _engine(tmp_path, unreachable_s=0.2, **RETRY_FAST)
        assert engine.batcher is not None
        engine.batcher.progress = lines.append
        tasks = [asyncio.create_task(engine.generate(provider, _req(i))) for i in range(3)]
        for _ in range(500):  # until the batch is submitted and polled once
            if server.stats["polls"] >= 1:
                break
            await asyncio.sleep(0.01)
        server.down = True
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        await engine.aclose()
    assert all(type(r) is ProviderError for r in results), results
    said = str(results[0])
    assert "the provider stopped answering" in said and "503" in said, said
    assert any("no answer from the provider" in line for line in lines), lines
