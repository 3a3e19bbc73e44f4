"""A service's stop ends even when one of its parts does not: each step is bounded, and a step that ignores its
cancellation is left behind rather than waited on (asyncio.wait_for would wait for it without limit)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from evoskill.platform import service
from evoskill.platform.service import RunningService, ServiceParts


class Stoppable:
    def __init__(self, stop: Any = None) -> None:
        self.stopped = False
        self._stop = stop

    async def stop(self) -> None:
        if self._stop is not None:
            await self._stop()
        self.stopped = True


def wedged(release: asyncio.Event) -> Any:
    """A part that, cancelled, goes on waiting (until the test releases it, so that its loop can close)."""
    async def stop() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await release.wait()
    return stop


async def test_a_part_that_ignores_its_cancellation_does_not_hold_the_stop(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(service, "STOP_STEP_S", 0.05)
    monkeypatch.setattr(service, "CANCEL_GRACE_S", 0.05)
    closed: list[str] = []

    async def close_store() -> None:
        closed.append("store")

    release = asyncio.Event()
    server, bus = Stoppable(wedged(release)), Stoppable()
    running = RunningService("planner", bus, server, ServiceParts(closers=[close_store]), [])  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        await asyncio.wait_for(running.stop(), 30)  # bounded only so that a regression fails instead of hanging

    assert not server.stopped and bus.stopped and closed == ["store"]  # the steps after the wedged one ran
    assert "stopping the gRPC server took over" in caplog.text
    release.set()
    await asyncio.sleep(0.01)  # the left-behind step ends before the loop closes


async def test_a_failing_step_is_logged_and_the_next_steps_run(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("the socket was already closed")

    bus = Stoppable()
    running = RunningService("memory", bus, Stoppable(broken), ServiceParts(), [])  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        await running.stop()

    assert bus.stopped
    assert "stopping the gRPC server failed" in caplog.text and "the socket was already closed" in caplog.text
