"""The hung-teardown dump names each frame a task is stopped in, down to what it awaits."""

from __future__ import annotations

import asyncio

from tests.bounded_async import await_chain


async def test_the_chain_reaches_the_innermost_await() -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def inner() -> None:
        await never

    async def outer() -> None:
        await inner()

    task = asyncio.create_task(outer())
    await asyncio.sleep(0)
    chain = await_chain(task.get_coro())
    assert [line.rsplit(" in ", 1)[-1] for line in chain[:2]] == ["outer", "inner"]
    assert len(chain) == 3 and chain[-1].startswith("  awaiting ")  # the future's iterator
    task.cancel()
