"""`beating`: a beat every period while the body runs, sync or async, and none after it ends."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from evoskill.orchestrator.training.activities import heartbeats
from evoskill.platform.beats import beating


async def test_beats_while_the_body_runs_and_stops_when_it_ends_even_by_an_error() -> None:
    sync: list[int] = []
    async_beats: list[int] = []

    async def beat() -> None:
        async_beats.append(1)

    async with beating(0.01, lambda: sync.append(1)), beating(0.01, beat):
        await asyncio.sleep(0.1)
    assert sync and async_beats
    with pytest.raises(RuntimeError, match="body"):
        async with beating(0.01, lambda: sync.append(1)):
            await asyncio.sleep(0.05)
            raise RuntimeError("body")
    after = len(sync)
    await asyncio.sleep(0.05)
    assert len(sync) == after


async def test_an_activity_heartbeats_while_its_long_call_runs() -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=1.5))  # a beat each 0.5 s
    beats: list[tuple[object, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    async def long_call() -> None:
        async with heartbeats():
            await asyncio.sleep(1.2)

    await env.run(long_call)
    assert beats  # timers fire in order: at 0.5 s at least, before the body's 1.2 s
