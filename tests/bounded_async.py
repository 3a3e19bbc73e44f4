"""A pytest plugin: an async test is cancelled `TEARDOWN_MARGIN_S` before its pytest timeout.

pytest-timeout ends a test from a signal handler, which unwinds the session's shared event loop past the test's
coroutine: its `finally` and `async with` never run, and the services it started go on serving in that loop
(one left its bus consumers reporting into a later test's metrics). Cancelled earlier instead, the test's own
teardown runs, and it fails as itself, its traceback showing where it waited.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

TEARDOWN_MARGIN_S = 30.0


def bounded(test: Callable[..., Awaitable[Any]], limit_s: float) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> Any:
        deadline = asyncio.timeout(limit_s)
        try:
            async with deadline:
                return await test(*args, **kwargs)
        except TimeoutError:
            if deadline.expired():
                pytest.fail(f"{test.__name__} ran past {limit_s:.0f} s: cancelled, its teardown run")
            raise

    return run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    default = float(config.getini("timeout") or 0)
    for item in items:
        test = getattr(item, "obj", None)
        marker = item.get_closest_marker("timeout")
        limit = float(marker.args[0]) if marker and marker.args else default
        if inspect.iscoroutinefunction(test) and limit > TEARDOWN_MARGIN_S:
            item.obj = bounded(test, limit - TEARDOWN_MARGIN_S)  # type: ignore[attr-defined]
