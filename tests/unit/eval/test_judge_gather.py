"""judges.gather: one awaitable is awaited in the caller's task (a task for it would have
nothing to overlap with); several run concurrently as asyncio.gather runs them, results in
order, an exception propagates either way."""

from __future__ import annotations

import asyncio

import pytest

from app.eval.scoring.judges import gather


async def _where(value: int) -> tuple[int, asyncio.Task[object] | None]:
    await asyncio.sleep(0)
    return value, asyncio.current_task()


def test_one_awaitable_runs_in_the_callers_task() -> None:
    async def main() -> None:
        me = asyncio.current_task()
        [(value, task)] = await gather([_where(7)], one_by_one=False)
        assert (value, task) == (7, me)
        # a generator of one works the same
        [(value, task)] = await gather((_where(i) for i in range(1)), one_by_one=False)
        assert (value, task) == (0, me)

    asyncio.run(main())


def test_several_awaitables_run_as_tasks_in_order() -> None:
    async def main() -> None:
        me = asyncio.current_task()
        done = await gather([_where(1), _where(2), _where(3)], one_by_one=False)
        assert [v for v, _ in done] == [1, 2, 3]
        assert all(t is not me for _, t in done)
        assert await gather([], one_by_one=False) == []

    asyncio.run(main())


def test_an_error_of_a_single_awaitable_propagates() -> None:
    async def boom() -> int:
        raise ValueError("judge failed")

    async def main() -> None:
        with pytest.raises(ValueError, match="judge failed"):
            await gather([boom()], one_by_one=False)

    asyncio.run(main())
