"""The content-addressed response cache, through the engine and directly."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from app.llm.cache import ResponseCache, cache_key, default_cache_path
from app.llm.engine import Engine
from app.llm.providers.families import parse_provider
from app.llm.recording import recording
from app.llm.types import Completion, Usage
from tests.support.fake_llm_server import FakeLLMServer, server_error
from tests.unit.llm.helpers import chat

pytestmark = pytest.mark.usefixtures("planted_keys")
EngineFactory = Callable[..., Engine]


def provider(server: FakeLLMServer) -> str:
    return f"openai:gpt-4o-mini@{server.openai_base_url}"


async def run_suite(engine: Engine, server: FakeLLMServer, n: int = 5) -> list[Completion]:
    return await asyncio.gather(
        *(engine.generate(provider(server), chat(f"case {i}")) for i in range(n))
    )


async def test_second_identical_run_makes_no_provider_calls(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory, isolated_cache: Path
) -> None:
    first = await run_suite(engine_factory(), fake_llm_server)
    assert fake_llm_server.requests == 5
    second_engine = engine_factory()  # a new run, same cache directory
    second = await run_suite(second_engine, fake_llm_server)
    assert fake_llm_server.requests == 5
    assert second_engine.stats.calls == 0 and second_engine.stats.cache_hits == 5
    assert [c.text for c in second] == [c.text for c in first]
    assert all(c.cached for c in second) and not any(c.cached for c in first)
    # a hit reports what the call is worth (the same cost), but this run spent nothing
    assert [c.cost_usd for c in second] == [c.cost_usd for c in first]
    assert all(c.cost_usd for c in first)
    assert second_engine.stats.cost_usd == 0.0
    assert second[0].request_id == first[0].request_id and second[0].usage == first[0].usage
    assert default_cache_path().is_relative_to(isolated_cache)


async def test_n_samples_are_n_entries(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    request = chat("judge this", purpose="judge", temperature=0.0)

    async def samples(engine: Engine) -> list[Completion]:
        return [
            await engine.generate(provider(fake_llm_server), request, sample_index=i)
            for i in range(3)
        ]

    first = await samples(engine_factory())
    assert fake_llm_server.requests == 3
    assert [c.sample_index for c in first] == [0, 1, 2]
    assert len({c.request_id for c in first}) == 3  # three real answers, not one reused
    second = await samples(engine_factory())
    assert fake_llm_server.requests == 3
    assert [c.request_id for c in second] == [c.request_id for c in first]
    assert [c.sample_index for c in second] == [0, 1, 2]


async def test_changed_prompt_or_model_or_purpose_misses(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    engine = engine_factory()
    p = provider(fake_llm_server)
    await engine.generate(p, chat("q"))
    await engine.generate(p, chat("q"))
    assert fake_llm_server.requests == 1
    await engine.generate(p, chat("q", system="Another system prompt."))
    await engine.generate(p.replace("gpt-4o-mini", "gpt-4o"), chat("q"))
    await engine.generate(p, chat("q", purpose="judge"))
    await engine.generate(p, chat("q", temperature=0.7))
    assert fake_llm_server.requests == 5


async def test_refresh_and_no_cache_modes(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    p = provider(fake_llm_server)
    await engine_factory().generate(p, chat("q"))
    fake_llm_server.script("fresh answer")
    refreshed = await engine_factory(refresh_cache=True).generate(p, chat("q"))
    assert refreshed.text == "fresh answer" and not refreshed.cached
    assert (await engine_factory().generate(p, chat("q"))).text == "fresh answer"  # overwritten
    no_cache = engine_factory(cache=False)
    await no_cache.generate(p, chat("q"))
    await no_cache.generate(p, chat("q"))
    assert fake_llm_server.requests == 4


async def test_fresh_answers_asks_the_candidate_again_and_keeps_judge_hits(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    """--fresh-answers (the nightly's): yesterday's answer is not replayed, a judge call on an
    unchanged request is still a hit, and the new answer replaces the old entry."""
    p = provider(fake_llm_server)
    yesterday = engine_factory()
    await yesterday.generate(p, chat("q"))
    await yesterday.generate(p, chat("rewrite q", purpose="rewrite"))
    await yesterday.generate(p, chat("score it", purpose="judge"))
    assert fake_llm_server.requests == 3
    fake_llm_server.script("today's answer", "today's rewrite")
    today = engine_factory(refresh_answers=True)
    answer = await today.generate(p, chat("q"))
    rewrite = await today.generate(p, chat("rewrite q", purpose="rewrite"))
    judged = await today.generate(p, chat("score it", purpose="judge"))
    assert (answer.text, rewrite.text) == ("today's answer", "today's rewrite")
    assert not answer.cached and not rewrite.cached and judged.cached
    assert fake_llm_server.requests == 5 and today.stats.cache_hits == 1
    assert today.replay([]) is None  # no recorded piece of work stands in for a fresh answer
    assert (await engine_factory().generate(p, chat("q"))).text == "today's answer"


async def test_a_recorded_call_replays_after_the_same_reply_is_stored_again_and_never_after_a_new_one(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    """The warm cache's check (Engine.replay): a --refresh-cache that stores the same words
    again (another latency) keeps the recorded work replayable; different words never do."""
    p = provider(fake_llm_server)
    with recording() as calls:
        first = await engine_factory().generate(p, chat("q"))
    assert len(calls) == 1 and calls[0] is not None
    again = await engine_factory(refresh_cache=True).generate(p, chat("q"))
    assert again.text == first.text == "echo: q" and fake_llm_server.requests == 2
    replayed = engine_factory().replay(calls)
    assert replayed is not None and [c.text for c in replayed] == ["echo: q"]
    fake_llm_server.script("a new answer")
    await engine_factory(refresh_cache=True).generate(p, chat("q"))
    assert engine_factory().replay(calls) is None


async def test_errors_are_never_cached(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(server_error(500))
    engine = engine_factory(max_attempts=1)
    with pytest.raises(Exception, match="HTTP 500"):
        await engine.generate(provider(fake_llm_server), chat("q"))
    assert ResponseCache().count() == 0
    assert (await engine.generate(provider(fake_llm_server), chat("q"))).text == "echo: q"


async def test_identical_calls_in_flight_are_made_once(engine_factory: EngineFactory) -> None:
    with FakeLLMServer(latency_s=0.1) as server:
        engine = engine_factory()
        results = await asyncio.gather(
            *(engine.generate(provider(server), chat("q")) for _ in range(4))
        )
        assert server.requests == 1
        assert [r.cached for r in results].count(False) == 1
        assert engine.stats.cache_hits == 3


async def test_generation_and_judge_entries_are_distinguishable(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    engine = engine_factory()
    await engine.generate(provider(fake_llm_server), chat("a"))
    await engine.generate(provider(fake_llm_server), chat("b", purpose="judge"), sample_index=1)
    cache = ResponseCache()
    assert (cache.count("generation"), cache.count("judge")) == (1, 1)
    rows = sqlite3.connect(cache.path).execute("SELECT namespace, sample_index FROM responses")
    assert sorted(rows.fetchall()) == [("generation", 0), ("judge", 1)]
    assert sqlite3.connect(cache.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.close()


def test_key_is_stable_and_covers_sample_and_base_url() -> None:
    spec = parse_provider("openai:m@http://127.0.0.1:1/v1")
    key = cache_key(spec, chat("q"), 0)
    assert key == cache_key(spec, chat("q"), 0) and len(key) == 64
    assert key != cache_key(spec, chat("q"), 1)
    assert key != cache_key(parse_provider("openai:m@http://127.0.0.1:2/v1"), chat("q"), 0)
    assert key != cache_key(parse_provider("openai:m"), chat("q"), 0)


_WRITER = """
import sys
from pathlib import Path
from app.llm.cache import ResponseCache
from app.llm.providers.families import parse_provider
from app.llm.recording import recording
from app.llm.types import ChatRequest, Completion, Message
cache = ResponseCache(Path(sys.argv[1]))
spec = parse_provider("openai:m")
tag = sys.argv[2]
for i in range(int(sys.argv[3])):
    req = ChatRequest(model="m", system=None, messages=(Message("user", f"{tag}-{i}"),))
    cache.put(str(i) + tag, Completion(text=f"{tag}-{i}", provider="openai", model="m"),
              spec=spec, request=req)
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    n = 300
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), tag, str(n)])
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    cache = ResponseCache(path)
    assert cache.count() == 2 * n
    hit = cache.get("7b")
    assert hit is not None and hit.text == "b-7" and hit.cached
    cache.close()


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    completion = Completion(
        text="文本 [1]",
        provider="anthropic",
        model="claude-sonnet-4-6",
        finish_reason="end_turn",
        usage=Usage(1, 2, 3, 4),
        latency_s=0.5,
        request_id="req_9",
        cost_usd=None,
        sample_index=2,
    )
    spec = parse_provider("anthropic:claude-sonnet-4-6")
    cache.put("k", completion, spec=spec, request=chat())
    assert cache.get("k") == replace(completion, cached=True)  # cost stays unknown (None)
    assert cache.get("missing") is None
    cache.close()
