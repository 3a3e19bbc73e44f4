"""The event bus: FastStream over NATS JetStream.

One stream (`nats.stream`, default EVOSKILL) holds every subject under `evoskill.`; events are protobuf
messages from `evoskill.events.v1` (one schema source). Consumers are durable pull consumers with
explicit acks, so replicas of a service share the work. A failing message is redelivered with backoff
up to `nats.max_deliver` times, then dead-lettered; a message that cannot be decoded, that breaks the schema
of limits (`evoskill.core.limits`, checked before the handler runs), that is over `nats.max_message_bytes`,
or that the handler rejects as bad input (`evoskill.core.errors.InvalidInput`), goes straight to the
dead-letter subject `evoskill.dlq.<subject>` carrying the original payload, headers and the error, and the
consumer keeps going. A dead letter is always published inline: a payload too large to travel with it is
cut to a prefix with its size and sha256 (`DeadLetter.payload_truncated`), so no message is ever left
unresolved. The server stops redelivering one delivery after `nats.max_deliver` (a consumer that died
on every try, or never answered, gets that last one dead-lettered unhandled), so nothing loops forever.
Any other exception (a built-in `ValueError` from a bug included) is retried, never taken for bad input.
A batch consumer (`Bus.batch_consumer`, the memory's) handles each message of a pull so too, in its own span,
and writes the items of the pull at once (`platform.batching.Gatherer`); each is acked once the write returned.
Every publish is refused over `nats.max_message_bytes` (ResourceExhausted), and carries an idempotency key
(`Nats-Msg-Id`: the subject and a digest of the event's bytes): JetStream stores a second publish of the same
event within the stream's duplicate window once (a consumer that published, then died before its ack, publishes
again on the redelivery). Consumers are idempotent besides: the memory by experience key, the learner by episode id.
Trace context rides in the NATS headers (FastStream's NatsTelemetryMiddleware), so a consumer's span
continues the publisher's trace. A message over the server's max_payload travels through the object store
(`evoskill.platform.payloads`).
`ROUTES` lists what each service publishes and consumes: its NATS user is allowed exactly that
(`evoskill.platform.nats_auth`), and the Bus of a listed service refuses anything else (PermissionDenied), so the
table is what the code does. Credentials and TLS come from `nats.user`, `nats.password` and `nats.tls`.
Each consumer counts and times what it handles by outcome, and a watcher reports each durable consumer's
lag (messages not yet acknowledged) every `lag_interval_s`; see `evoskill.platform.metrics`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from faststream import AckPolicy
from faststream.nats import ConsumerConfig, JStream, NatsBroker, NatsMessage, PullSub, StreamConfig
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.nats.security import NatsSecurity, NatsUserPassword
from google.protobuf.message import DecodeError, Message
from nats.js.errors import BadRequestError, NotFoundError
from opentelemetry import trace

from evoskill.core.errors import DomainError, InvalidInput, PermissionDenied, ResourceExhausted
from evoskill.core.limits import MESSAGE_CHARS, bounded, check_message
from evoskill.events.v1 import events_pb2
from evoskill.platform import metrics
from evoskill.platform.batching import Gatherer
from evoskill.platform.beats import beating
from evoskill.platform.config import NatsSettings, Settings
from evoskill.platform.payloads import PayloadMissingError, Payloads, PayloadTooLargeError, payload_bucket
from evoskill.platform.tls import client_context

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
T = TypeVar("T")
HEADER_CHARS = 512  # of each header name and value a dead letter keeps
HEADERS_KEPT = 64  # headers a dead letter keeps
MSG_ID = "Nats-Msg-Id"  # JetStream's deduplication header
LAG_WATCHER_STOP_S = 5.0  # a stop waits this long for the cancelled lag watcher at most


class ConsumerInfoSource(Protocol):
    """What the lag watcher asks (nats-py's JetStream context)."""

    async def consumer_info(self, stream: str, consumer: str,
                            timeout: float | None = None) -> Any: ...  # noqa: ASYNC109 (nats-py's signature)


@dataclass(frozen=True)
class Subjects:
    """Subject names (without the prefix) and the message type each carries."""

    STEP_EXECUTED = "step.executed"
    REWARD_SCORED = "reward.scored"
    EPISODE_COMPLETED = "episode.completed"
    SEARCH_STATS = "search.stats"
    POLICY_PUBLISHED = "policy.published"
    POLICY_SERVING = "policy.serving"
    DLQ = "dlq"


@dataclass(frozen=True)
class Route:
    """What one service publishes and consumes on the bus (subject names without the prefix)."""

    publishes: tuple[str, ...] = ()
    consumes: tuple[str, ...] = ()


S = Subjects
ROUTES: dict[str, Route] = {
    "sandbox": Route(publishes=(S.STEP_EXECUTED,)),
    "reward": Route(publishes=(S.REWARD_SCORED,), consumes=(S.STEP_EXECUTED,)),
    "memory": Route(consumes=(S.REWARD_SCORED, S.EPISODE_COMPLETED)),
    "planner": Route(publishes=(S.SEARCH_STATS, S.EPISODE_COMPLETED), consumes=(S.POLICY_PUBLISHED, S.POLICY_SERVING)),
    "learner": Route(publishes=(S.POLICY_PUBLISHED, S.POLICY_SERVING), consumes=(S.EPISODE_COMPLETED,)),
    "orchestrator": Route(),
}


def connect_options(nats: NatsSettings) -> dict[str, Any]:
    """Keyword arguments of `nats.connect` for this process: its user and password, and TLS."""
    options: dict[str, Any] = {}
    if nats.user:
        options.update(user=nats.user, password=nats.password.get_secret_value())
    if (context := client_context(nats.tls)) is not None:
        options.update(tls=context, tls_hostname=nats.tls.server_name or None)
    return options


def broker_security(nats: NatsSettings) -> NatsSecurity | None:
    """`connect_options` as FastStream takes them."""
    options = connect_options(nats)
    context, hostname = options.get("tls"), options.get("tls_hostname")
    if nats.user:
        return NatsUserPassword(options["user"], options["password"], ssl_context=context, tls_hostname=hostname)
    return NatsSecurity(ssl_context=context, tls_hostname=hostname) if options else None


class Bus:
    """A service's connection to the event bus."""

    def __init__(self, settings: Settings, service: str, lag_interval_s: float = 5.0) -> None:
        self.settings = settings
        self.lag_interval_s = lag_interval_s
        self._consumers: list[tuple[str, str]] = []  # (durable, subject), for the lag watcher
        self._lag_watcher: asyncio.Task[None] | None = None
        self.service = service
        self.prefix = settings.nats.subject_prefix
        self.broker = NatsBroker(
            settings.nats_url,
            security=broker_security(settings.nats),
            middlewares=[NatsTelemetryMiddleware(tracer_provider=trace.get_tracer_provider())],
            logger=logging.getLogger(f"evoskill.{service}.bus"),
            graceful_timeout=10.0,
        )
        # Declared by _ensure_stream, not by FastStream: it would narrow the subjects to the subscribed ones.
        self.stream = JStream(name=settings.nats.stream, declare=False)
        self.stream_config = StreamConfig(
            name=settings.nats.stream, subjects=[f"{self.prefix}.>"], max_age=settings.nats.max_age_s
        )
        self.payloads = Payloads(self.broker, payload_bucket(settings.nats.stream), settings.nats.max_age_s,
                                 settings.nats.max_message_bytes)

    def subject(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def _check_route(self, name: str, verb: str) -> None:
        route = ROUTES.get(self.service)
        if route is not None and name not in (route.publishes if verb == "publish" else route.consumes):
            raise PermissionDenied(f"{self.service} does not {verb} {name}: platform.bus.ROUTES lists what it "
                                   "does, and its NATS user may do no more")

    async def start(self) -> None:
        await self.broker.connect()
        await self._ensure_stream()
        await self._bound_redelivery()  # before the subscriptions pull: an update then would strand their pulls
        await self.broker.start()
        if self._consumers:
            self._lag_watcher = asyncio.create_task(self._watch_lag(self.broker.config.connection_state.stream))

    async def stop(self) -> None:
        if self._lag_watcher is not None:
            self._lag_watcher.cancel()
            done, _ = await asyncio.wait({self._lag_watcher}, timeout=LAG_WATCHER_STOP_S)
            if not done:  # never seen since `_watch_lag` checks its cancellation itself; a stop must not hang on it
                log.warning("the lag watcher did not stop within %.0f s of its cancellation; left behind",
                            LAG_WATCHER_STOP_S)
            for durable, subject in self._consumers:
                metrics.forget_lag(self.stream.name, durable, subject)
        await self.broker.stop()

    async def _watch_lag(self, js: ConsumerInfoSource) -> None:
        """Each consumer's lag every `lag_interval_s`, until cancelled. nats-py swallows a cancellation that lands
        while a request is flushed (`Client._send_command`); the request then times out into the `except` below,
        and a watcher that only awaited its cancellation looped on, hanging `stop` (a CI teardown, 300 s): the
        cancellation requested is checked before each request and each sleep."""
        task = asyncio.current_task()
        while True:
            for durable, subject in self._consumers:
                if task is not None and task.cancelling():
                    return
                try:
                    info = await js.consumer_info(self.stream.name, durable, timeout=2.0)
                except Exception as exc:  # a slow or restarting server: report again next round
                    log.debug("%s: no consumer info (%s)", durable, exc)
                    continue
                metrics.set_lag(self.stream.name, durable, subject, info.num_pending + info.num_ack_pending)
            if task is not None and task.cancelling():
                return
            await asyncio.sleep(self.lag_interval_s)

    @property
    def server_max_deliver(self) -> int:
        """The server's bound on deliveries: one past ours, the delivery that dead-letters a message whose every
        handling died unfinished."""
        return self.settings.nats.max_deliver + 1

    async def _bound_redelivery(self) -> None:
        # A durable made before redelivery was bounded (or with another max_deliver) keeps its config: update it.
        js = self.broker.config.connection_state.stream
        for durable, _ in self._consumers:
            try:
                info = await js.consumer_info(self.stream.name, durable)
            except NotFoundError:
                continue  # new: broker.start() makes it with the bound
            if info.config.max_deliver != self.server_max_deliver:
                info.config.max_deliver = self.server_max_deliver
                await js.add_consumer(self.stream.name, info.config)

    async def _ensure_stream(self) -> None:
        # Publishers may start before any consumer declared the stream; adding it is idempotent.
        js = self.broker.config.connection_state.stream
        try:
            await js.add_stream(config=self.stream_config)
        except BadRequestError:
            await js.update_stream(config=self.stream_config)

    async def publish(self, name: str, message: Message, headers: dict[str, str] | None = None) -> None:
        """Publish an event to `<prefix>.<name>` on the stream and wait for the stream's ack; ResourceExhausted
        over `nats.max_message_bytes`."""
        self._check_route(name, "publish")
        data = message.SerializeToString(deterministic=True)  # the same event, the same bytes, the same key
        if len(data) > self.settings.nats.max_message_bytes:
            raise ResourceExhausted(f"a {type(message).__name__} of {len(data)} bytes for {self.subject(name)} is "
                                    f"over nats.max_message_bytes ({self.settings.nats.max_message_bytes})")
        headers = {MSG_ID: f"{name}:{hashlib.sha256(data).hexdigest()}", **(headers or {})}
        body, headers = await self.payloads.outgoing(self.subject(name), data, headers)
        await self._publish_inline(name, body, headers)

    async def _publish_inline(self, name: str, body: bytes, headers: dict[str, str] | None) -> None:
        await self.broker.publish(
            body,
            self.subject(name),
            headers=headers,
            stream=self.stream.name,
            timeout=5.0,
        )

    def consumer(
        self, name: str, message_type: type[M], durable: str | None = None, per_replica: bool = False,
        fetch: int = 16,
    ) -> Callable[[Callable[[M], Awaitable[Any]]], Callable[[M], Awaitable[Any]]]:
        """Register `handler(message)` as a durable consumer of `<prefix>.<name>`.

        Replicas of a service share one durable and so split the work; `per_replica` marks a durable of
        one replica alone (every replica must see every message), which the server deletes after
        `nats.replica_consumer_ttl_s` without a client, so replicas that went away leave nothing behind.

        The handler is called with the decoded message once it passed `core.limits`; raising InvalidInput
        dead-letters the message at once with the reason; any other exception is retried with backoff, then
        dead-lettered when `nats.max_deliver` deliveries have failed. The messages of one fetch are handled
        concurrently (`fetch` at a time), so a handler must not rely on their order (announcements carry
        versions to compare).
        """
        self._check_route(name, "consume")
        durable = durable or self._durable_name(name)
        subject, nats = self.subject(name), self.settings.nats
        self._consumers.append((durable, subject))  # watched for lag

        def register(handler: Callable[[M], Awaitable[Any]]) -> Callable[[M], Awaitable[Any]]:
            @self.broker.subscriber(
                subject,
                stream=self.stream,
                durable=durable,
                pull_sub=PullSub(batch_size=fetch, timeout=1.0),
                ack_policy=AckPolicy.MANUAL,
                # Redelivery is bounded here (dead-letter after max_deliver) and by the server (one more).
                config=ConsumerConfig(ack_wait=nats.ack_wait_s, max_deliver=self.server_max_deliver,
                                      inactive_threshold=nats.replica_consumer_ttl_s if per_replica else None),
            )
            async def receive(msg: NatsMessage) -> None:
                started = time.perf_counter()
                outcome = await handle(msg)
                metrics.record_message(subject, durable, outcome, time.perf_counter() - started)

            async def handle(msg: NatsMessage) -> str:
                deliveries, decoded = await self._admit(msg, name, durable, message_type)
                if decoded is None:
                    return metrics.DEAD_LETTERED
                try:
                    # A handler longer than ack_wait (a batch's write) is not redelivered meanwhile.
                    async with beating(nats.ack_wait_s / 3, lambda: self._in_progress(msg)):
                        await handler(decoded)
                except InvalidInput as exc:
                    await self._dead_letter(msg, name, durable, deliveries, f"rejected: {exc}")
                    return metrics.DEAD_LETTERED
                except Exception as exc:
                    return await self._failed(msg, name, durable, deliveries, exc)
                await msg.ack()
                return metrics.OK

            return handler

        return register

    def batch_consumer(
        self, name: str, message_type: type[M], prepare: Callable[[M], T], batch_size: int = 16,
        wait_s: float = 0.05, durable: str | None = None,
    ) -> Callable[[Callable[[list[T]], Awaitable[Any]]], Callable[[list[T]], Awaitable[Any]]]:
        """Register `write(items)` as a durable consumer of `<prefix>.<name>` that writes the items of up to
        `batch_size` messages at once.

        Each message is handled as `consumer` handles it, in its own span of its publisher's trace, with its
        own ack, retry and dead letter: `prepare(message)` makes its item (raising InvalidInput there
        dead-letters that message alone, with the reason), then a `Gatherer` waits up to `wait_s` for the other
        messages of the pull (handled concurrently) and hands their items to one `write`. Each message is
        acknowledged once that write returned; if it raised, each is retried with backoff (dead-lettered after
        `nats.max_deliver` deliveries), so `write` must be idempotent: a retried item may come in another batch.
        """
        subject = self.subject(name)
        durable = durable or self._durable_name(name)

        def register(write: Callable[[list[T]], Awaitable[Any]]) -> Callable[[list[T]], Awaitable[Any]]:
            gatherer = Gatherer(write, batch_size, wait_s, lambda n: metrics.record_batch(subject, durable, n))

            @self.consumer(name, message_type, durable, fetch=batch_size)
            async def handle(message: M) -> None:
                await gatherer.add(prepare(message))

            return write

        return register

    @staticmethod
    async def _in_progress(msg: NatsMessage) -> None:
        """Tell the server the message is still being worked on (its ack_wait starts again)."""
        try:
            await msg.in_progress()
        except Exception as exc:  # a slow or restarting server: the next beat tries again
            log.debug("no in-progress ack (%s)", exc)

    def _durable_name(self, name: str) -> str:
        return f"{self.service}-{name.replace('.', '-')}"

    async def _admit(self, msg: NatsMessage, name: str, durable: str, message_type: type[M]) -> tuple[int, M | None]:
        """(deliveries, the decoded message), or None for it once dead-lettered: delivered once past
        `nats.max_deliver`, undecodable, or beyond `core.limits`."""
        deliveries = int(msg.raw_message.metadata.num_delivered or 1)
        if deliveries > self.settings.nats.max_deliver:
            reason = f"delivered {deliveries} times without an outcome (its handling died or hung each time)"
            await self._dead_letter(msg, name, durable, deliveries, reason)
            return deliveries, None
        try:
            decoded = message_type.FromString(await self.payloads.incoming(msg.body, msg.headers))
        except (DecodeError, PayloadMissingError, PayloadTooLargeError) as exc:
            await self._dead_letter(msg, name, durable, deliveries, f"cannot decode {message_type.__name__}: {exc}")
            return deliveries, None
        try:
            check_message(decoded)
        except InvalidInput as exc:
            await self._dead_letter(msg, name, durable, deliveries, f"rejected: {exc}")
            return deliveries, None
        return deliveries, decoded

    async def _failed(self, msg: NatsMessage, name: str, durable: str, deliveries: int, exc: Exception) -> str:
        """A handling that raised: retried with backoff (RETRY), or dead-lettered once it failed `max_deliver`
        times."""
        nats = self.settings.nats
        if deliveries >= nats.max_deliver:
            reason = f"failed {deliveries} times, last: {type(exc).__name__}: {exc}"
            await self._dead_letter(msg, name, durable, deliveries, reason)
            return metrics.DEAD_LETTERED
        delay = nats.backoff_s[min(deliveries, len(nats.backoff_s)) - 1] if nats.backoff_s else 0
        # A domain error is expected to pass (a dependency comes back); anything else is a bug.
        log.log(logging.WARNING if isinstance(exc, DomainError) else logging.ERROR,
                "%s: delivery %d failed (%s: %s), retrying in %.1fs", durable, deliveries,
                type(exc).__name__, exc, delay, exc_info=not isinstance(exc, DomainError))
        await msg.nack(delay=delay)
        return metrics.RETRY

    async def _dead_letter(self, msg: NatsMessage, name: str, consumer: str, deliveries: int, error: str) -> None:
        error = bounded(error, MESSAGE_CHARS)
        log.error("%s: dead-lettering a message of %s: %s", consumer, name, error)
        body = bytes(msg.body)
        letter = events_pb2.DeadLetter(
            subject=self.subject(name),
            payload=body,
            headers={str(k)[:HEADER_CHARS]: str(v)[:HEADER_CHARS]
                     for k, v in list((msg.headers or {}).items())[:HEADERS_KEPT]},
            error=error,
            consumer=consumer,
            deliveries=deliveries,
            payload_size=len(body),
            payload_sha256=hashlib.sha256(body).hexdigest(),
        )
        room = self.payloads.limit - (letter.ByteSize() - len(body))  # what the payload may take of the letter
        if len(body) > room:
            letter.payload, letter.payload_truncated = body[:max(0, room - 16)], True
        # One letter per message and consumer: if the reject below is lost (a timeout on a loaded server) and
        # the message comes again, JetStream drops the second letter as a duplicate of the first.
        sequence = msg.raw_message.metadata.sequence.stream
        await self._publish_inline(f"{Subjects.DLQ}.{name}", letter.SerializeToString(),
                                   {"evoskill-error": error[:HEADER_CHARS], MSG_ID: f"dead:{consumer}:{sequence}"})
        # Terminate: the server must not redeliver what now lives in the dead-letter subject.
        await msg.reject()
