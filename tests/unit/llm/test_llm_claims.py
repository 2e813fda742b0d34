"""The cross-process claim of the response cache (app/llm/claims.py).

Two engines on one cache file in one process are two owners (each ResponseCache has its own
token), so most cases run in-process; the SIGKILL case uses a real second process. Counts
come from the fake server (it counts the requests it received).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.errors import ProviderError
from app.llm.cache import ResponseCache, default_cache_path
from app.llm.claims import CLAIM_TTL_S, process_alive
from app.llm.engine import Engine
from tests.support.fake_llm_server import FakeLLMServer, hang, server_error
from tests.unit.llm.helpers import chat

pytestmark = pytest.mark.usefixtures("planted_keys")
EngineFactory = Callable[..., Engine]
REPO = Path(__file__).resolve().parents[3]


def provider(server: FakeLLMServer) -> str:
    return f"openai:gpt-4o-mini@{server.openai_base_url}"


def claims_rows(path: Path) -> list[tuple[object, ...]]:
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=10) as conn:
        try:
            return conn.execute("SELECT key, owner_pid FROM claims").fetchall()
        except sqlite3.OperationalError:  # the table is not there yet
            return []


async def test_two_owners_started_together_pay_once(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.latency_s = 0.2
    a, b = engine_factory(), engine_factory()
    requests = [chat(f"case {i}") for i in range(4)]
    both = await asyncio.gather(
        *(a.generate(provider(fake_llm_server), r) for r in requests),
        *(b.generate(provider(fake_llm_server), r) for r in requests),
    )
    assert fake_llm_server.requests == 4  # not 8
    assert a.stats.calls + b.stats.calls == 4
    assert a.stats.cache_hits + b.stats.cache_hits == 4
    assert [c.text for c in both[:4]] == [c.text for c in both[4:]]
    assert sum(c.cached for c in both) == 4  # the waiter's copies come from the cache
    assert claims_rows(default_cache_path()) == []  # every claim released with its entry


async def test_owner_failure_releases_the_claim_and_the_waiter_calls(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.latency_s = 0.1
    fake_llm_server.script(server_error(400))  # the first request fails, not retryable
    a, b = engine_factory(), engine_factory()
    request = chat("fails once")
    first = asyncio.create_task(a.generate(provider(fake_llm_server), request))
    await asyncio.sleep(0.05)  # a holds the claim, its request is in flight
    second = asyncio.create_task(b.generate(provider(fake_llm_server), request))
    with pytest.raises(ProviderError):
        await first
    async with asyncio.timeout(5):
        completion = await second
    assert completion.text == "echo: fails once" and not completion.cached
    assert fake_llm_server.requests == 2 and b.stats.calls == 1
    assert claims_rows(default_cache_path()) == []


async def test_cancelled_owner_releases_the_claim(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(hang(20))
    a, b = engine_factory(), engine_factory()
    request = chat("cancel me")
    first = asyncio.create_task(a.generate(provider(fake_llm_server), request))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(b.generate(provider(fake_llm_server), request))
    await asyncio.sleep(0.3)
    assert not second.done()  # waiting on a's live claim, no request of its own
    assert fake_llm_server.requests == 1
    first.cancel()
    async with asyncio.timeout(5):
        completion = await second
    assert completion.text == "echo: cancel me"
    assert fake_llm_server.requests == 2


async def test_a_waiter_gives_up_after_claim_wait_s(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script(hang(20))
    a, b = engine_factory(), engine_factory(claim_wait_s=0.5)
    request = chat("slow owner")
    first = asyncio.create_task(a.generate(provider(fake_llm_server), request))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    async with asyncio.timeout(5):
        completion = await b.generate(provider(fake_llm_server), request)
    assert 0.5 <= time.monotonic() - started < 4
    assert completion.text == "echo: slow owner" and fake_llm_server.requests == 2
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_an_owner_refreshes_its_claims_while_it_calls(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.llm.engine.HEARTBEAT_S", 0.05)
    fake_llm_server.script(hang(20))
    engine = engine_factory()
    task = asyncio.create_task(engine.generate(provider(fake_llm_server), chat("long call")))
    expiries = []
    for _ in range(2):
        await asyncio.sleep(0.3)
        with sqlite3.connect(default_cache_path(), timeout=10) as conn:
            expiries.append(conn.execute("SELECT expires FROM claims").fetchone()[0])
    assert expiries[1] > expiries[0] > time.time()  # pushed ahead while the call runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert claims_rows(default_cache_path()) == []


def test_stale_claims_are_taken_over_and_live_ones_are_not(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    mine, other = ResponseCache(path), ResponseCache(path)
    try:
        assert mine.claim("k1")
        assert not other.claim("k1")  # live: same host, this pid runs
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        dead_pid = int(dead.stdout)
        assert not process_alive(dead_pid)
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "INSERT INTO claims VALUES ('k2', ?, NULL, ?, 'gone', ?)",
                (dead_pid, socket.gethostname(), time.time() + CLAIM_TTL_S),
            )
            # alive pid (ours) on a host we cannot check, but the claim expired
            conn.execute(
                "INSERT INTO claims VALUES ('k3', ?, NULL, 'elsewhere', 'old', ?)",
                (os.getpid(), time.time() - 1),
            )
            conn.execute(
                "INSERT INTO claims VALUES ('k4', ?, NULL, 'elsewhere', 'far', ?)",
                (dead_pid, time.time() + CLAIM_TTL_S),
            )
        conn.close()
        assert other.claim("k2") and other.claim("k3")
        assert not other.claim("k4")  # another host: only its expiry can free it
        mine.close()  # releases k1
        assert other.claim("k1")
        assert process_alive(os.getpid()) and not process_alive(-1)
    finally:
        mine.close()
        other.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT key FROM claims").fetchall() == [("k4",)]


_OWNER = textwrap.dedent(
    """
    import asyncio, sys
    from app.llm.engine import Engine, EngineConfig
    from tests.unit.llm.helpers import chat

    async def main() -> None:
        async with Engine(EngineConfig(timeout_s=60)) as engine:
            await engine.generate(sys.argv[1], chat("killed owner"))

    asyncio.run(main())
    """
)


async def test_sigkilled_owner_frees_its_claim_by_the_pid_check(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory, isolated_cache: Path
) -> None:
    fake_llm_server.script(hang(30))  # the owner's request never comes back
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, provider(fake_llm_server)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not claims_rows(default_cache_path()) or fake_llm_server.requests < 1:
            assert owner.poll() is None, owner.stderr.read() if owner.stderr else ""
            assert time.monotonic() < deadline, "the owner never claimed its call"
            await asyncio.sleep(0.05)
        assert claims_rows(default_cache_path())[0][1] == owner.pid
        waiter = asyncio.create_task(
            engine_factory().generate(provider(fake_llm_server), chat("killed owner"))
        )
        await asyncio.sleep(0.5)
        assert not waiter.done() and fake_llm_server.requests == 1  # it waits for the owner
        os.kill(owner.pid, signal.SIGKILL)  # not reaped yet: a zombie counts as dead too
        killed_at = time.monotonic()
        async with asyncio.timeout(5):
            completion = await waiter
        assert time.monotonic() - killed_at < CLAIM_TTL_S / 3  # the pid check, not the expiry
        assert completion.text == "echo: killed owner" and not completion.cached
        assert fake_llm_server.requests == 2
        assert claims_rows(default_cache_path()) == []
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait(timeout=10)
        if owner.stderr:
            owner.stderr.close()
