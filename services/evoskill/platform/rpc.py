"""gRPC helpers: an aio server with health, tracing, metrics and graceful shutdown, and a client
factory whose every call has a deadline and whose retries cover only calls that are safe to repeat. Servers and
channels speak TLS when `grpc.tls` is set (`evoskill.platform.tls`; mutual with `grpc.tls.client_auth`), and
servers offer reflection only with `grpc.reflection` (a development aid).

Every request is decoded and checked against the schema of limits (`evoskill.core.limits`) before the servicer
sees it (`RequestLimits`): bytes that are no such request, or a request over a limit, answer INVALID_ARGUMENT
naming the field. Errors: servicer methods wrapped by `@rpc_method` turn the domain errors of
`evoskill.core.errors` into their status (InvalidInput -> INVALID_ARGUMENT, NotFound -> NOT_FOUND, ...),
`TimeoutError` into DEADLINE_EXCEEDED and a downstream call's failure into that call's status, each with a
message naming the problem. Anything else is a bug: INTERNAL, and its stack trace goes to the log, never to
the caller. No message is longer than `limits.MESSAGE_CHARS`, whatever it quotes.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor

from evoskill.core import errors
from evoskill.core.limits import bounded, check_message
from evoskill.platform.config import GrpcSettings
from evoskill.platform.deadlines import AioDeadlineChannel, DeadlineChannel
from evoskill.platform.interceptors import WrappingInterceptor, streamed, wrapped_handler
from evoskill.platform.metrics import RpcMetricsInterceptor
from evoskill.platform.tls import channel_credentials, server_credentials

log = logging.getLogger(__name__)

# Methods that change nothing (or are idempotent by key) and may be retried after UNAVAILABLE.
SAFE_TO_RETRY: dict[str, tuple[str, ...]] = {
    "evoskill.sandbox.v1.SandboxService": ("Simulate",),
    "evoskill.reward.v1.RewardService": ("Score",),
    "evoskill.memory.v1.MemoryService": ("Retrieve", "Store"),
    "evoskill.learner.v1.LearnerService": ("GetPolicy", "ListPolicies"),
    "grpc.health.v1.Health": ("Check",),
}

# New work that waits, up to its deadline, for a server that is down (restarting after a crash) instead of
# failing at once (gRPC wait-for-ready): an episode's new session, a score. Other calls fail fast: a call on a
# session is lost with its sandbox anyway, memory is advice, and a person or a workflow calling the planner
# or the learner hears at once.
WAIT_FOR_READY: dict[str, tuple[str, ...]] = {
    "evoskill.sandbox.v1.SandboxService": ("CreateSession",),
    "evoskill.reward.v1.RewardService": ("Score",),
}
# A channel retries a lost connection at most this often (gRPC's default grows to 120 s): a restarted server
# is reached within a second.
RECONNECT_BACKOFF_MS = (100, 1000)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


_STATUS_OF: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (errors.InvalidInput, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
)


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status and message a caller gets for `exc`: a domain error's own, a downstream call's own, else
    INTERNAL (a bug)."""
    if isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None)):
        return exc.code(), bounded(exc.details() or "")  # type: ignore[attr-defined]
    code = next((c for kind, c in _STATUS_OF if isinstance(exc, kind)), grpc.StatusCode.INTERNAL)
    prefix = "internal error: " if code is grpc.StatusCode.INTERNAL else ""
    return code, bounded(f"{prefix}{type(exc).__name__}: {exc}")


async def abort_for(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    """End the call with `exc`'s status (see `status_for`); a bug is logged with its stack trace."""
    code, message = status_for(exc)
    if code is grpc.StatusCode.INTERNAL:
        log.error("%s failed", method, exc_info=exc)
    await context.abort(code, message)


def rpc_method(fn: F) -> F:
    """Map what a unary servicer method raises to a gRPC status with a clear message (see `status_for`)."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await fn(self, request, context)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort_for(context, exc, fn.__qualname__)

    return wrapper  # type: ignore[return-value]


class _Undecodable(NamedTuple):
    """What the server got instead of a request: bytes that do not decode as one."""

    reason: str


def _decoder(decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def safe(data: bytes) -> Any:
        try:
            return decode(data)
        except Exception as exc:  # corrupt wire format, a string field that is no UTF-8, ...
            return _Undecodable(f"cannot decode the request: {type(exc).__name__}: {exc}")

    return safe


def refusal(request: Any) -> str | None:
    """Why `request` is refused before any servicer sees it (None: it is not)."""
    if isinstance(request, _Undecodable):
        return request.reason
    if isinstance(request, Message):
        try:
            check_message(request)
        except errors.InvalidInput as exc:
            return str(exc)
    return None


async def _refuse(context: grpc.aio.ServicerContext, reason: str) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bounded(reason))


def _checked_unary(behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if (reason := refusal(request)) is not None:
            await _refuse(context, reason)
        result = behavior(request, context)
        return await result if inspect.isawaitable(result) else result

    return call


def _checked_stream_in(behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def checked() -> AsyncIterator[Any]:
            i = 0
            async for request in requests:
                if (reason := refusal(request)) is not None:
                    await _refuse(context, f"message {i} of the stream: {reason}")
                yield request
                i += 1

        result = behavior(checked(), context)
        return await result if inspect.isawaitable(result) else result

    return call


def _checked_stream_out(behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        if (reason := refusal(request)) is not None:
            await _refuse(context, reason)
        async for item in streamed(behavior(request, context)):
            yield item

    return call


# The check of each kind of call; none for stream_stream (no service here has one), served as it is.
_CHECKED = {"unary_unary": _checked_unary, "stream_unary": _checked_stream_in, "unary_stream": _checked_stream_out}


class RequestLimits(WrappingInterceptor):
    """Decodes every request without ever failing and refuses, with INVALID_ARGUMENT naming the problem, one
    that does not decode or breaks `evoskill.core.limits` (gRPC itself would answer UNKNOWN or let it in)."""

    def wrap(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> grpc.RpcMethodHandler[Any, Any]:
        if handler.request_deserializer is None:
            return handler
        return wrapped_handler(handler, _CHECKED, _decoder(handler.request_deserializer))


@dataclass
class GrpcServer:
    """A running aio server; `stop()` drains in-flight calls for the grace period."""

    server: grpc.aio.Server
    port: int
    health: HealthServicer
    service_names: list[str] = field(default_factory=list)
    grace_s: float = 5.0

    async def stop(self) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.grace_s)

    async def wait(self) -> None:
        await self.server.wait_for_termination()


async def start_server(
    registrations: Iterable[tuple[Callable[[Any, grpc.aio.Server], None], Any, str]],
    address: str,
    settings: GrpcSettings | None = None,
) -> GrpcServer:
    """Serve each (add_XServicer_to_server, servicer, full service name) on `address` ("host:port";
    port 0 picks a free one). Health reports SERVING for "" and every service name."""
    settings = settings or GrpcSettings()
    options: list[tuple[str, int]] = [("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    if settings.max_connection_age_s > 0:
        # GOAWAY after this age (calls in flight finish): clients reconnect, re-resolve and see new replicas.
        options.append(("grpc.max_connection_age_ms", int(settings.max_connection_age_s * 1000)))
    # RequestLimits innermost: the metrics count its refusals as INVALID_ARGUMENT.
    interceptors = [aio_server_interceptor(), RpcMetricsInterceptor(), RequestLimits()]
    server = grpc.aio.server(interceptors=interceptors, options=options)
    names: list[str] = []
    for add, servicer, name in registrations:
        add(servicer, server)
        names.append(name)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    if settings.reflection:
        reflection.enable_server_reflection([*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                                             reflection.SERVICE_NAME], server)
    if settings.tls.enabled:
        port = server.add_secure_port(address, server_credentials(settings.tls))
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot bind gRPC server to {address}")
    await server.start()
    for name in ["", *names]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    return GrpcServer(server, port, health, names, settings.shutdown_grace_s)


def service_config(settings: GrpcSettings) -> str:
    """Retries on UNAVAILABLE only for SAFE_TO_RETRY methods; WAIT_FOR_READY methods wait for their server; calls
    spread over every address the target resolves to (a headless Service's DNS name lists each replica).
    Deadlines are not here but on each call (`evoskill.platform.deadlines`)."""
    retry = {
        "maxAttempts": max(2, settings.retries),
        "initialBackoff": "0.1s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    configs: list[dict[str, Any]] = []
    for service in sorted(SAFE_TO_RETRY.keys() | WAIT_FOR_READY.keys()):
        retried, waiting = SAFE_TO_RETRY.get(service, ()), WAIT_FOR_READY.get(service, ())
        for method in sorted({*retried, *waiting}):  # one entry per method: gRPC refuses a name listed twice
            config: dict[str, Any] = {"name": [{"service": service, "method": method}]}
            if method in retried:
                config["retryPolicy"] = retry
            if method in waiting:
                config["waitForReady"] = True
            configs.append(config)
    return json.dumps({"methodConfig": configs, "loadBalancingConfig": [{"round_robin": {}}]})


def _name_override(settings: GrpcSettings) -> list[tuple[str, Any]]:
    """The name a TLS server's certificate is checked against, where it is not the host dialled."""
    return [("grpc.ssl_target_name_override", settings.tls.server_name)] if settings.tls.server_name else []


def _channel_options(settings: GrpcSettings) -> list[tuple[str, Any]]:
    return [*_name_override(settings),
        ("grpc.service_config", service_config(settings)),
        ("grpc.enable_retries", 1),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        # A new channel gets new connections: one shared with older channels may still be backing off
        # from a restarted server, and round_robin would fail the first call at once.
        ("grpc.use_local_subchannel_pool", 1),
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
    ]


def _aio_channel(target: str, settings: GrpcSettings, options: list[tuple[str, Any]],
                 interceptors: Any = None) -> grpc.aio.Channel:
    if settings.tls.enabled:
        return grpc.aio.secure_channel(target, channel_credentials(settings.tls), options, interceptors=interceptors)
    return grpc.aio.insecure_channel(target, options, interceptors=interceptors)


def channel(target: str, settings: GrpcSettings | None = None) -> grpc.aio.Channel:
    """A traced aio channel with the default deadline and safe retries configured (TLS with `settings.tls`)."""
    settings = settings or GrpcSettings()
    return AioDeadlineChannel(_aio_channel(target, settings, _channel_options(settings), aio_client_interceptors()),
                              settings)


def sync_channel(target: str, settings: GrpcSettings | None = None) -> grpc.Channel:
    """A blocking channel (for search running in a worker thread), traced and configured like `channel`."""
    from opentelemetry.instrumentation.grpc import client_interceptor
    from opentelemetry.instrumentation.grpc.grpcext import intercept_channel

    settings = settings or GrpcSettings()
    options = _channel_options(settings)
    raw = (grpc.secure_channel(target, channel_credentials(settings.tls), options) if settings.tls.enabled
           else grpc.insecure_channel(target, options))
    traced = intercept_channel(raw, client_interceptor())  # OTel's own wrapper for sync channels
    return DeadlineChannel(traced, settings)


async def check_health(target: str, service: str = "", timeout_s: float = 2.0,
                       settings: GrpcSettings | None = None) -> bool:
    """True when the server at target reports SERVING for service (over TLS with `settings.tls`)."""
    settings = settings or GrpcSettings()
    async with _aio_channel(target, settings, _name_override(settings)) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
