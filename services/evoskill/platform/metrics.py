"""Per-service metrics (OpenTelemetry): gRPC server calls and bus consumers.

Instruments live on the process's meter provider (`setup_telemetry` installs it with `service.name` and
`service.version`); `use_meter_provider` points them at another provider, which is how tests read them
with an in-memory reader. Names and attributes (the collector turns dots into underscores for Prometheus):

- `evoskill.rpc.server.requests` counter {rpc.service, rpc.method, rpc.grpc.status_code} (status name, "OK")
- `evoskill.rpc.server.duration` histogram, seconds {rpc.service, rpc.method}
- `evoskill.bus.messages` counter {messaging.destination.name, messaging.consumer.group.name, outcome}
  with outcome `ok`, `retry` (nacked for redelivery) or `dead_lettered`
- `evoskill.bus.handle.duration` histogram, seconds {messaging.destination.name, messaging.consumer.group.name}
- `evoskill.bus.batch.size` histogram, messages {messaging.destination.name, messaging.consumer.group.name}:
  the messages a batch consumer wrote at once (one per successful write)
- `evoskill.bus.consumer.lag` gauge {messaging.nats.stream, messaging.consumer.group.name,
  messaging.destination.name}: messages of the durable consumer not yet acknowledged (JetStream
  num_pending + num_ack_pending), refreshed by the bus every few seconds
- `evoskill.memory.compactions` counter {outcome}: the memory's compactions run, `ok` or `failed`
- `evoskill.memory.compaction.experiences` counter: experiences summarised into the cold tier
- `evoskill.memory.compaction.episodes` counter {reason}: episodes moved cold, by the limit that sent them
- `evoskill.memory.cold.summaries` counter: cold summaries written (new ones, or merged into)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Meter, MeterProvider, Observation

from evoskill.platform.interceptors import WrappingInterceptor, streamed, wrapped_handler
from evoskill.platform.telemetry import meter as global_meter

RPC_REQUESTS = "evoskill.rpc.server.requests"
RPC_DURATION = "evoskill.rpc.server.duration"
BUS_MESSAGES = "evoskill.bus.messages"
BUS_DURATION = "evoskill.bus.handle.duration"
BUS_LAG = "evoskill.bus.consumer.lag"
BUS_BATCH = "evoskill.bus.batch.size"
MEMORY_COMPACTIONS = "evoskill.memory.compactions"
MEMORY_SUMMARISED = "evoskill.memory.compaction.experiences"
MEMORY_COLD_EPISODES = "evoskill.memory.compaction.episodes"
MEMORY_SUMMARIES = "evoskill.memory.cold.summaries"
LLM_REQUESTS = "evoskill.llm.requests"
LLM_TOKENS = "evoskill.llm.tokens"

OK, RETRY, DEAD_LETTERED, FAILED = "ok", "retry", "dead_lettered", "failed"

# Seconds: from a health check (sub-millisecond) to a whole episode (minutes).
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 300.0, 1800.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # messages

# (stream, durable, subject) -> unacknowledged messages, written by each Bus's lag watcher.
_lag: dict[tuple[str, str, str], int] = {}


def set_lag(stream: str, durable: str, subject: str, value: int) -> None:
    _lag[(stream, durable, subject)] = value


def forget_lag(stream: str, durable: str, subject: str) -> None:
    _lag.pop((stream, durable, subject), None)


def _observe_lag(options: CallbackOptions) -> Iterable[Observation]:
    for (stream, durable, subject), value in list(_lag.items()):
        yield Observation(value, {"messaging.nats.stream": stream, "messaging.consumer.group.name": durable,
                                  "messaging.destination.name": subject})


@dataclass
class Instruments:
    rpc_requests: Counter
    rpc_duration: Histogram
    bus_messages: Counter
    bus_duration: Histogram
    bus_batch: Histogram
    compactions: Counter
    summarised: Counter
    cold_episodes: Counter
    summaries: Counter
    llm_requests: Counter
    llm_tokens: Counter

    @classmethod
    def on(cls, meter: Meter) -> Instruments:
        meter.create_observable_gauge(BUS_LAG, [_observe_lag], unit="{message}",
                                      description="Messages of a durable consumer not yet acknowledged")
        return cls(
            rpc_requests=meter.create_counter(RPC_REQUESTS, unit="{request}",
                                              description="gRPC calls served, by method and status"),
            rpc_duration=meter.create_histogram(RPC_DURATION, unit="s", description="gRPC call duration",
                                                explicit_bucket_boundaries_advisory=DURATION_BUCKETS),
            bus_messages=meter.create_counter(BUS_MESSAGES, unit="{message}",
                                              description="Bus messages handled, by outcome"),
            bus_duration=meter.create_histogram(BUS_DURATION, unit="s", description="Bus message handling time",
                                                explicit_bucket_boundaries_advisory=DURATION_BUCKETS),
            bus_batch=meter.create_histogram(BUS_BATCH, unit="{message}",
                                             description="Messages a batch consumer wrote at once",
                                             explicit_bucket_boundaries_advisory=BATCH_BUCKETS),
            compactions=meter.create_counter(MEMORY_COMPACTIONS, "{compaction}", "Memory compactions run, by outcome"),
            summarised=meter.create_counter(MEMORY_SUMMARISED, "{experience}", "Experiences summarised cold"),
            cold_episodes=meter.create_counter(MEMORY_COLD_EPISODES, "{episode}", "Episodes moved cold, by reason"),
            summaries=meter.create_counter(MEMORY_SUMMARIES, "{summary}", "Cold summaries written or merged into"),
            llm_requests=meter.create_counter(LLM_REQUESTS, unit="{request}",
                                              description="LLM answers, by outcome (answered, cached, failed)"),
            llm_tokens=meter.create_counter(LLM_TOKENS, unit="{token}",
                                            description="LLM tokens the endpoint reported, by kind"),
        )


_instruments: Instruments | None = None


def instruments() -> Instruments:
    global _instruments
    if _instruments is None:
        _instruments = Instruments.on(global_meter())
    return _instruments


def use_meter_provider(provider: MeterProvider | None) -> None:
    """Record on `provider` from now on; None goes back to the process-wide provider."""
    global _instruments
    _instruments = None if provider is None else Instruments.on(provider.get_meter("evoskill"))


def record_message(subject: str, durable: str, outcome: str, seconds: float) -> None:
    attributes = {"messaging.destination.name": subject, "messaging.consumer.group.name": durable}
    found = instruments()
    found.bus_messages.add(1, {**attributes, "outcome": outcome})
    found.bus_duration.record(seconds, attributes)


def record_batch(subject: str, durable: str, size: int) -> None:
    instruments().bus_batch.record(size, {"messaging.destination.name": subject,
                                          "messaging.consumer.group.name": durable})


def record_compaction(outcome: str, experiences: int = 0, episodes: dict[str, int] | None = None,
                      summaries: int = 0) -> None:
    """One compaction: what it summarised, the episodes it moved cold by reason, the summaries it wrote."""
    found = instruments()
    found.compactions.add(1, {"outcome": outcome})
    found.summarised.add(experiences)
    for reason, n in (episodes or {}).items():
        found.cold_episodes.add(n, {"reason": reason})
    found.summaries.add(summaries)


class RpcMetricsInterceptor(WrappingInterceptor):
    """Counts every call by method and final status, and times it (streams: until the last message)."""

    def wrap(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> grpc.RpcMethodHandler[Any, Any]:
        service, _, name = method.lstrip("/").rpartition("/")
        unary = functools.partial(_unary, service=service, method=name)
        streaming = functools.partial(_streaming, service=service, method=name)
        return wrapped_handler(handler, {"unary_unary": unary, "stream_unary": unary, "unary_stream": streaming,
                                         "stream_stream": streaming}, handler.request_deserializer)


_STATUS_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}


@functools.cache  # one dict per method (and status): nothing built per call
def _attributes(service: str, method: str, status: str = "") -> dict[str, str]:
    attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
    return {**attributes, "rpc.grpc.status_code": status} if status else attributes


@contextlib.contextmanager
def _recorded(service: str, method: str, context: grpc.aio.ServicerContext) -> Iterator[None]:
    """Counts and times the call served inside, by the status it ends with (an error it raises included)."""
    started, error = time.perf_counter(), None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        _record_call(service, method, context, error, started)


def _record_call(service: str, method: str, context: grpc.aio.ServicerContext, error: BaseException | None,
                 started: float) -> None:
    code = context.code()  # an int (cygrpc's OK) until set_code/abort set a grpc.StatusCode
    if error is not None and not isinstance(error, grpc.aio.AbortError):
        code = grpc.StatusCode.CANCELLED if isinstance(error, (asyncio.CancelledError, GeneratorExit)) \
            else grpc.StatusCode.UNKNOWN
    if not isinstance(code, grpc.StatusCode):
        code = _STATUS_BY_VALUE.get(code or 0, grpc.StatusCode.UNKNOWN)
    found = instruments()
    found.rpc_requests.add(1, _attributes(service, method, code.name))
    found.rpc_duration.record(time.perf_counter() - started, _attributes(service, method))


def _unary(behavior: Callable[..., Any], service: str, method: str) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with _recorded(service, method, context):
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result

    return call


def _streaming(behavior: Callable[..., Any], service: str, method: str) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        with _recorded(service, method, context):
            async for item in streamed(behavior(request, context)):
                yield item

    return call


__all__ = ["BUS_BATCH", "BUS_DURATION", "BUS_LAG", "BUS_MESSAGES", "DEAD_LETTERED", "FAILED", "LLM_REQUESTS",
           "LLM_TOKENS", "MEMORY_COLD_EPISODES", "MEMORY_COMPACTIONS", "MEMORY_SUMMARIES", "MEMORY_SUMMARISED", "OK",
           "RETRY", "RPC_DURATION", "RPC_REQUESTS",
           "RpcMetricsInterceptor", "forget_lag", "instruments", "record_batch", "record_compaction", "record_message",
           "set_lag",
           "use_meter_provider"]
