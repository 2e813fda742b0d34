"""The runner starts its concurrent cases one event-loop turn apart (``runner.ramp``), so
the loop polls its sockets between two starts: the first case's I/O completes after a
couple of other starts, not after every case in flight has run to its first await (a case's
pipeline does its CPU work without yielding). Deterministic: the I/O is a socket pair whose
byte is already there, which the loop sees at its next poll (no thread, no clock)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from app.eval.run.runner import ramp

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


def test_ramp_propagates_the_first_error_and_cancels_on_cancel() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("case failed")

    with pytest.raises(ValueError, match="case failed"):
        asyncio.run(ramp(failing, 4))

    cancelled: list[bool] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        task = asyncio.ensure_future(ramp(slow, 5))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # two copies started, three not yet
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert 1 <= len(cancelled) <= 5 and all(cancelled)
