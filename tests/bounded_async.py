"""A pytest plugin: an async test is cancelled `TEARDOWN_MARGIN_S` before its pytest timeout; a teardown still
running after `TEARDOWN_DUMP_S` prints every asyncio task with the chain of awaits it is stopped in.

pytest-timeout ends a test from a signal handler, which unwinds the session's shared event loop past the test's
coroutine: its `finally` and `async with` never run, and the services it started go on serving in that loop
(one left its bus consumers reporting into a later test's metrics). Cancelled earlier instead, the test's own
teardown runs, and it fails as itself, its traceback showing where it waited. A fixture's teardown cannot be
cancelled that way, and pytest-timeout's own dump shows threads only, where a hung teardown shows an idle loop;
the await chains say what it waits for.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any

import pytest

TEARDOWN_MARGIN_S = 30.0
TEARDOWN_DUMP_S = 120.0  # no teardown here takes a tenth of it
_session_loop: list[asyncio.AbstractEventLoop] = []


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


@pytest.fixture(scope="session", autouse=True)
async def _remember_the_session_loop() -> AsyncIterator[None]:
    _session_loop.append(asyncio.get_running_loop())
    yield
    _session_loop.clear()


def await_chain(awaitable: Any) -> list[str]:
    """Where a coroutine is stopped: each frame of its chain of awaits, then what the innermost one awaits."""
    lines = []
    while awaitable is not None:
        frame = next((f for f in (getattr(awaitable, a, None) for a in ("cr_frame", "gi_frame", "ag_frame")) if f),
                     None)
        if frame is None:
            lines.append(f"  awaiting {awaitable!r}")
            break
        lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
        awaitable = next((w for w in (getattr(awaitable, a, None) for a in ("cr_await", "gi_yieldfrom", "ag_await"))
                          if w is not None), None)
    return lines


def dump_tasks(loop: asyncio.AbstractEventLoop) -> None:
    print(f"+++ a teardown has run {TEARDOWN_DUMP_S:.0f} s; every asyncio task and where it waits +++", file=sys.stderr)
    for task in asyncio.all_tasks(loop):
        print(f"--- {task.get_name()}", file=sys.stderr)
        print("\n".join(await_chain(task.get_coro())), file=sys.stderr)
        print(f"  the future it waits on: {getattr(task, '_fut_waiter', None)!r}", file=sys.stderr)
    sys.stderr.flush()


def _dump_soon() -> None:
    for loop in _session_loop:
        if loop.is_running():
            loop.call_soon_threadsafe(dump_tasks, loop)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    timer = threading.Timer(TEARDOWN_DUMP_S, _dump_soon)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
