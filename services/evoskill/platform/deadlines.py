"""Every client call carries a deadline: its caller's where it names one, else its method's default here.

The deadline is passed with each call, as `timeout=`, by a thin wrapper around the channel's callables, not
set in the channel's service config: gRPC Python computes a service config's timeout from a cached clock
(grpc/grpc#34547, #40633 report it firing about a second early), and a call past a 0.3 s service-config
deadline once ran to its end here (docs/faults.md). A timeout passed with the call is exact. The wrapper only
fills in `timeout`; the call, its interceptors and its cancellation are gRPC's own (an interceptor would wrap
every call in a task of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from evoskill.platform.config import GrpcSettings

# Calls that legitimately outlast the default deadline (whole episodes, environment start-up; a real step after
# a search, which on a replay-only environment such as ScienceWorld first replays the episode, and may wait for
# the search's last probe: the sandbox's worker watchdog bounds it).
LONG_CALLS: dict[str, tuple[tuple[str, ...], float]] = {
    "evoskill.planner.v1.PlannerService": (("PlayEpisode", "Search"), 3600.0),
    "evoskill.sandbox.v1.SandboxService": (("CreateSession", "Step"), 300.0),
    "evoskill.learner.v1.LearnerService": (("Train", "ImportEpisodes", "ExportEpisodes"), 3600.0),
}


def call_deadline(method: str | bytes, settings: GrpcSettings) -> float:
    """Seconds a call of `method` ("/package.Service/Method") may take when its caller names none."""
    name = method.decode() if isinstance(method, bytes) else method
    service, _, short = name.strip("/").partition("/")
    methods, seconds = LONG_CALLS.get(service, ((), 0.0))
    return seconds if short in methods else settings.deadline_s


class _WithDeadline:
    """A channel's callable for one method, calling with `seconds` where the caller names no timeout."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self._inner, self._seconds = inner, seconds

    def _timed(self, call: Callable[..., Any], request: Any, timeout: float | None, kwargs: dict[str, Any]) -> Any:
        return call(request, timeout=self._seconds if timeout is None else timeout, **kwargs)

    def __call__(self, request: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        return self._timed(self._inner, request, timeout, kwargs)

    def with_call(self, request: Any, timeout: float | None = None, **kwargs: Any) -> Any:  # blocking channels
        return self._timed(self._inner.with_call, request, timeout, kwargs)

    def future(self, request: Any, timeout: float | None = None, **kwargs: Any) -> Any:  # blocking channels
        return self._timed(self._inner.future, request, timeout, kwargs)


class _Callables:
    """The four kinds of callable, each with its method's deadline."""

    _inner: Any
    _settings: GrpcSettings

    def _wrap(self, kind: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return _WithDeadline(getattr(self._inner, kind)(method, *args, **kwargs), call_deadline(method, self._settings))

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._wrap("unary_unary", method, *args, **kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._wrap("unary_stream", method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._wrap("stream_unary", method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._wrap("stream_stream", method, *args, **kwargs)


class AioDeadlineChannel(_Callables, grpc.aio.Channel):  # type: ignore[misc]
    """An aio channel whose calls carry their deadline; everything else is the wrapped channel's."""

    def __init__(self, inner: grpc.aio.Channel, settings: GrpcSettings) -> None:
        self._inner, self._settings = inner, settings

    async def __aenter__(self) -> AioDeadlineChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.close(None)

    async def close(self, grace: float | None = None) -> None:
        await self._inner.close(grace)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._inner.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._inner.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._inner.channel_ready()


class DeadlineChannel(_Callables, grpc.Channel):  # type: ignore[misc]
    """The same for a blocking channel."""

    def __init__(self, inner: grpc.Channel, settings: GrpcSettings) -> None:
        self._inner, self._settings = inner, settings

    def subscribe(self, callback: Callable[[grpc.ChannelConnectivity], None], try_to_connect: bool = False) -> None:
        self._inner.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Callable[[grpc.ChannelConnectivity], None]) -> None:
        self._inner.unsubscribe(callback)

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> DeadlineChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()
