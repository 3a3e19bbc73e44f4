"""The bus's lag watcher stops when cancelled, even where nats-py swallows the cancellation: one that lands while a
request is flushed (`Client._send_command`) comes back as the request's timeout, an Exception the watcher logs and
goes on from; it then looped forever and hung `Bus.stop` (a CI teardown, 300 s)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from evoskill.platform.bus import Bus
from evoskill.platform.config import Settings


class SwallowingJetStream:
    """consumer_info as nats-py answers it when cancelled mid-flush: the cancellation eaten, a timeout raised."""

    def __init__(self) -> None:
        self.calls = 0
        self.in_flight = asyncio.Event()

    async def consumer_info(self, stream: str, consumer: str, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        self.calls += 1
        self.in_flight.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as nats-py's flush does
            await asyncio.sleep(3600)  # the request in flight
        raise TimeoutError("nats: timeout")


async def test_a_watcher_whose_cancellation_nats_swallowed_stops_before_its_next_request() -> None:
    bus = Bus(Settings(), "memory", lag_interval_s=0.01)
    bus._consumers = [("first", "evoskill.a"), ("second", "evoskill.b")]
    js = SwallowingJetStream()
    watcher = asyncio.create_task(bus._watch_lag(js))
    await js.in_flight.wait()
    watcher.cancel()
    done, _ = await asyncio.wait({watcher}, timeout=30)  # a guard against the hang, not a timing
    assert watcher in done and not watcher.cancelled() and watcher.exception() is None
    assert js.calls == 1  # neither the second consumer asked nor another round
