"""Beats while a long call runs: Temporal activity heartbeats, JetStream in-progress acks."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable


@contextlib.asynccontextmanager
async def beating(period_s: float, beat: Callable[[], Awaitable[None] | None]) -> AsyncIterator[None]:
    """Call `beat()` every `period_s` while the body runs; stopped when the body ends, however it ends."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(period_s)
            result = beat()
            if inspect.isawaitable(result):
                await result

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
