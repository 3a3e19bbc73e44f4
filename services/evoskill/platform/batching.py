"""Gather what concurrent callers hand in and write it at once.

A bus consumer handles the messages of one pull concurrently, each in its own span with its own ack; a
`Gatherer` lets each of those handlers add its item and wait until one `write(items)` of the whole batch has
returned (or raise what it raised), so the memory writes a pull with one Qdrant upsert while every message
keeps its trace, its acknowledgement and its dead letter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Gatherer(Generic[T]):
    """`await add(item)` returns once a `write` holding `item` has returned, and raises what it raised.

    A batch is written when it holds `size` items, or `wait_s` after its first item came (callers that arrive
    together, such as the handlers of one pull, share a batch). `on_written(n)` is told each written batch's
    size. A caller that is cancelled while it waits leaves its item in the batch: the write goes on.
    """

    def __init__(self, write: Callable[[list[T]], Awaitable[Any]], size: int, wait_s: float,
                 on_written: Callable[[int], None] | None = None) -> None:
        if size < 1 or wait_s < 0:
            raise ValueError(f"a batch needs size >= 1 and wait_s >= 0, not {size} and {wait_s}")
        self.write, self.size, self.wait_s, self.on_written = write, size, wait_s, on_written
        self._items: list[T] = []
        self._done: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._writes: set[asyncio.Task[None]] = set()  # held so that none is garbage-collected mid-write

    async def add(self, item: T) -> None:
        loop = asyncio.get_running_loop()
        if self._done is None:
            self._done = loop.create_future()
            self._timer = loop.call_later(self.wait_s, self._flush)
        done = self._done
        self._items.append(item)
        if len(self._items) >= self.size:
            self._flush()
        await asyncio.shield(done)

    def _flush(self) -> None:
        if self._done is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        items, done = self._items, self._done
        self._items, self._done, self._timer = [], None, None
        task = asyncio.get_running_loop().create_task(self._write(items, done))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, items: list[T], done: asyncio.Future[None]) -> None:
        try:
            await self.write(items)
        except Exception as exc:
            done.set_exception(exc)
            done.exception()  # retrieved here too: a batch whose callers were all cancelled logs nothing
        else:
            if self.on_written is not None:
                self.on_written(len(items))
            done.set_result(None)
        finally:
            if not done.done():  # the write itself was cancelled (the service stops): so are its callers
                done.cancel()
