"""Every client call carries a deadline: its own where the caller gives one, else its method's default here.

The deadline is set on the call itself by a client interceptor, not by the channel's service config: gRPC
Python computes a service config's timeout from a cached clock, so it can fire about a second early
(grpc/grpc#34547, #40633), and a call past a 0.3 s service-config deadline once ran to completion here. A
timeout passed with the call is exact.
"""

from __future__ import annotations

from collections import namedtuple
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


class _Deadline:
    """The call's details with a deadline: the caller's, else `call_deadline`'s."""

    def __init__(self, settings: GrpcSettings) -> None:
        self._settings = settings

    def _aio(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        if details.timeout is not None:
            return details
        return grpc.aio.ClientCallDetails(details.method, call_deadline(details.method, self._settings),
                                          details.metadata, details.credentials, details.wait_for_ready)


# grpc.aio files an interceptor under the first kind of call it implements, so each kind has its own class.
class _UnaryUnary(_Deadline, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Callable[..., Any], client_call_details: Any,
                                    request: Any) -> Any:
        return await continuation(self._aio(client_call_details), request)


class _UnaryStream(_Deadline, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Callable[..., Any], client_call_details: Any,
                                     request: Any) -> Any:
        return await continuation(self._aio(client_call_details), request)


class _StreamUnary(_Deadline, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Callable[..., Any], client_call_details: Any,
                                     request_iterator: Any) -> Any:
        return await continuation(self._aio(client_call_details), request_iterator)


class _StreamStream(_Deadline, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Callable[..., Any], client_call_details: Any,
                                      request_iterator: Any) -> Any:
        return await continuation(self._aio(client_call_details), request_iterator)


def aio_deadline_interceptors(settings: GrpcSettings) -> list[grpc.aio.ClientInterceptor]:
    """One interceptor per kind of call, for an aio channel."""
    return [kind(settings) for kind in (_UnaryUnary, _UnaryStream, _StreamUnary, _StreamStream)]


class _SyncDetails(namedtuple("_SyncDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                                               "compression")), grpc.ClientCallDetails):
    pass


class SyncDeadline(_Deadline, grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """The same for a blocking channel (`grpc.intercept_channel` files one interceptor under every kind)."""

    def _sync(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        if details.timeout is not None:
            return details
        return _SyncDetails(details.method, call_deadline(details.method, self._settings), details.metadata,
                            details.credentials, getattr(details, "wait_for_ready", None),
                            getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation: Callable[..., Any], client_call_details: Any, request: Any) -> Any:
        return continuation(self._sync(client_call_details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], client_call_details: Any, request: Any) -> Any:
        return continuation(self._sync(client_call_details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], client_call_details: Any,
                               request_iterator: Any) -> Any:
        return continuation(self._sync(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation: Callable[..., Any], client_call_details: Any,
                                request_iterator: Any) -> Any:
        return continuation(self._sync(client_call_details), request_iterator)
