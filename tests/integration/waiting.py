"""Polling helpers shared by the integration tests: events, metrics and stores arrive on their own time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

import grpc
import pytest


async def until(check: Callable[[], bool | Awaitable[bool]], what: str, within_s: float = 90.0) -> None:
    """Poll `check` (plain or async) until it holds; fail naming `what` after `within_s`."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        result = check()
        if await result if inspect.isawaitable(result) else result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def rpc_error(call: Awaitable[object]) -> grpc.aio.AioRpcError:
    """The status a call fails with (the test fails if it succeeds)."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value
