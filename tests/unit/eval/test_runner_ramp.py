"""The runner's workers are started one event-loop turn apart (``runner.ramp``), so the first
case's request leaves before the other cases in flight have done their own pipeline work,
and otherwise behave like ``asyncio.gather``: the first exception propagates, a cancelled
run cancels every copy already started."""

from __future__ import annotations

import asyncio
import socket

import pytest

from app.eval.run.runner import ramp


def test_a_started_copy_runs_on_before_the_copies_after_it_start() -> None:
    events: list[str] = []
    counter = iter(range(100))

    async def copy() -> None:
        i = next(counter)
        events.append(f"start {i}")
        await asyncio.sleep(0)  # as a case's first request: it yields to the loop
        events.append(f"sent {i}")

    asyncio.run(ramp(copy, 4))
    # all started and all finished; the first copy's request went out before the third started
    # (under gather every copy starts before any one's first await returns)
    assert sorted(events) == sorted(
        [f"start {i}" for i in range(4)] + [f"sent {i}" for i in range(4)]
    )
    assert events.index("sent 0") < events.index("start 2")


def test_a_failing_copy_propagates_its_exception() -> None:
    counter = iter(range(100))
    finished: list[int] = []

    async def copy() -> None:
        i = next(counter)
        await asyncio.sleep(0)
        if i == 1:
            raise ValueError("copy 1 failed")
        finished.append(i)

    with pytest.raises(ValueError, match="copy 1 failed"):
        asyncio.run(ramp(copy, 3))


def _cancel_after(turns: int, count: int) -> list[asyncio.Task[None]]:
    started: list[asyncio.Task[None]] = []

    async def copy() -> None:
        task = asyncio.current_task()
        assert task is not None
        started.append(task)
        await asyncio.Event().wait()  # never set: only a cancel ends it

    async def main() -> None:
        outer = asyncio.ensure_future(ramp(copy, count))
        for _ in range(turns):
            await asyncio.sleep(0)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        await asyncio.gather(*started, return_exceptions=True)

    asyncio.run(main())
    return started


def test_a_run_cancelled_while_its_workers_start_cancels_those_started() -> None:
    started = _cancel_after(turns=3, count=50)
    assert 0 < len(started) < 50
    assert all(t.cancelled() for t in started)


def test_a_run_cancelled_after_all_started_cancels_them_all() -> None:
    started = _cancel_after(turns=20, count=5)
    assert len(started) == 5
    assert all(t.cancelled() for t in started)


# the first case's I/O: a socket pair whose byte is already there, which the loop sees at its
# next poll (deterministic: no thread, no clock)
COPIES = 32


async def _started_before_first_io(launch: str) -> tuple[int, int]:
    """(copies started when copy 0's I/O came back, copies run to the end)."""
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    started: list[int] = []
    ended: list[int] = []
    seen: list[int] = []

    async def copy() -> None:
        index = len(started)
        started.append(index)
        if index == 0:  # the first case: its request goes out, its reply is there already
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(b, ready.set_result, None)
            a.send(b"x")
            try:
                await ready
            finally:
                loop.remove_reader(b)
            seen.append(len(started))
        else:
            await asyncio.sleep(0)
        ended.append(index)

    try:
        if launch == "ramp":
            await ramp(copy, COPIES)
        else:  # what the runner did before: every copy's first step before the loop polls
            await asyncio.gather(*(copy() for _ in range(COPIES)))
    finally:
        a.close()
        b.close()
    return seen[0], len(ended)


def test_the_first_io_completes_after_a_few_starts_not_all() -> None:
    started, ended = asyncio.run(_started_before_first_io("ramp"))
    assert ended == COPIES
    assert started <= 3
    # the same I/O under a plain gather waits for every copy's first step
    assert asyncio.run(_started_before_first_io("gather")) == (COPIES, COPIES)
