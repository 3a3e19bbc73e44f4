"""The bus against a real nats-server: trace propagation, dead letters, bounded redelivery."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from evoskill.core.errors import InvalidInput, ResourceExhausted
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.payloads import PAYLOAD_HEADER
from evoskill.platform.service import ServiceParts, start_service
from evoskill.platform.telemetry import current_trace_id, tracer
from tests.integration.waiting import until

pytestmark = pytest.mark.integration


def isolated(settings: Settings) -> Settings:
    """Own stream and prefix per test: JetStream streams may not overlap in subjects."""
    tag = uuid.uuid4().hex[:8]
    nats = settings.nats.model_copy(update={"stream": f"T{tag}", "subject_prefix": f"t{tag}"})
    return settings.model_copy(update={"nats": nats})


async def test_trace_context_travels_with_the_message(settings: Settings, spans) -> None:  # type: ignore[no-untyped-def]
    settings = isolated(settings)
    producer, consumer = Bus(settings, "producer"), Bus(settings, "consumer")
    seen: list[str] = []
    arrived = asyncio.Event()

    @consumer.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        seen.append(current_trace_id())
        arrived.set()

    await consumer.start()
    await producer.start()
    try:
        with tracer().start_as_current_span("publish-test"):
            sent_trace = current_trace_id()
            await producer.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="v1"))
        await asyncio.wait_for(arrived.wait(), 10)
    finally:
        await producer.stop()
        await consumer.stop()
    assert sent_trace
    assert seen == [sent_trace]


async def test_poison_message_is_dead_lettered_and_does_not_block(settings: Settings) -> None:
    settings = isolated(settings)
    bus = Bus(settings, "svc")
    watcher = Bus(settings, "watcher")
    processed: list[str] = []
    letters: list[events_pb2.DeadLetter] = []
    all_done = asyncio.Event()

    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        if message.version == "bad":
            raise InvalidInput("version 'bad' is not a version")
        processed.append(message.version)
        if len(processed) == 3 and len(letters) == 2:
            all_done.set()

    @watcher.consumer(f"{Subjects.DLQ}.{Subjects.POLICY_PUBLISHED}", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)
        if len(processed) == 3 and len(letters) == 2:
            all_done.set()

    await bus.start()
    await watcher.start()
    try:
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="a"))
        # Not a PolicyPublished at all: undecodable bytes.
        await bus.broker.publish(b"\xff\xff\xff", bus.subject(Subjects.POLICY_PUBLISHED), stream=bus.stream.name)
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="bad"))
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="b"))
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="c"))
        await asyncio.wait_for(all_done.wait(), 15)
    finally:
        await bus.stop()
        await watcher.stop()
    # One fetch's messages are handled concurrently (faststream's pull consumer), so order is not promised.
    assert sorted(processed) == ["a", "b", "c"]
    errors = sorted(letter.error for letter in letters)
    assert any("cannot decode PolicyPublished" in e for e in errors)
    assert any("version 'bad' is not a version" in e for e in errors)
    bad = next(letter for letter in letters if "rejected" in letter.error)
    assert events_pb2.PolicyPublished.FromString(bad.payload).version == "bad"
    assert bad.subject == bus.subject(Subjects.POLICY_PUBLISHED)
    assert bad.consumer == "svc-policy-published"


async def test_failures_other_than_bad_input_are_retried_then_dead_lettered(settings: Settings) -> None:
    settings = isolated(settings)  # max_deliver=3 in the test settings
    bus = Bus(settings, "svc")
    attempts: dict[str, int] = {}
    letters: list[events_pb2.DeadLetter] = []
    done = asyncio.Event()

    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        attempts[message.version] = attempts.get(message.version, 0) + 1
        if message.version == "flaky" and attempts["flaky"] < 2:
            raise ConnectionError("downstream briefly unavailable")
        if message.version == "buggy" and attempts["buggy"] < 2:
            raise ValueError("invalid literal for int()")  # a bug, built-in: redelivered, not bad input
        if message.version == "broken":
            raise KeyError("downstream is down")

    @bus.consumer(f"{Subjects.DLQ}.{Subjects.POLICY_PUBLISHED}", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)
        done.set()

    await bus.start()
    try:
        for version in ("flaky", "buggy", "broken"):
            await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version=version))
        await asyncio.wait_for(done.wait(), 15)
        await until(lambda: attempts.get("flaky") == attempts.get("buggy") == 2, "the retried messages", 10)
    finally:
        await bus.stop()
    assert attempts == {"flaky": 2, "buggy": 2, "broken": 3}
    assert len(letters) == 1
    assert letters[0].deliveries == 3
    assert "failed 3 times" in letters[0].error and "KeyError" in letters[0].error
    assert events_pb2.PolicyPublished.FromString(letters[0].payload).version == "broken"


async def test_a_replicas_own_consumer_is_removed_after_it_goes_away(settings: Settings) -> None:
    settings = isolated(settings)
    nats = settings.nats.model_copy(update={"replica_consumer_ttl_s": 1.0})
    settings = settings.model_copy(update={"nats": nats})
    shared, replica = Bus(settings, "shared"), Bus(settings, "replica")

    @shared.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def work(message: events_pb2.PolicyPublished) -> None: ...

    @replica.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished, durable="replica-a", per_replica=True)
    async def follow(message: events_pb2.PolicyPublished) -> None: ...

    await shared.start()
    await replica.start()
    await replica.stop()
    js = shared.broker.config.connection_state.stream  # type: ignore[attr-defined]
    try:
        for _ in range(50):  # the server sweeps inactive consumers every few seconds
            names = {c.name for c in await js.consumers_info(settings.nats.stream)}
            if "replica-a" not in names:
                break
            await asyncio.sleep(0.2)
        assert "replica-a" not in names
        assert "shared-policy-published" in names  # a shared durable outlives its clients
    finally:
        await shared.stop()


async def test_a_message_over_max_payload_travels_through_the_object_store(settings: Settings) -> None:
    settings = isolated(settings)
    bus, watcher = Bus(settings, "svc"), Bus(settings, "watcher")
    received: list[events_pb2.DeadLetter] = []
    letters: list[events_pb2.DeadLetter] = []

    @bus.consumer("big.thing", events_pb2.DeadLetter)
    async def handle(message: events_pb2.DeadLetter) -> None:
        received.append(message)

    @watcher.consumer(f"{Subjects.DLQ}.big.thing", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)

    await bus.start()
    await watcher.start()
    js = bus.broker.config.connection_state.stream  # type: ignore[attr-defined]
    try:
        max_payload = bus.broker.config.connection_state.connection.max_payload  # type: ignore[attr-defined]
        big = events_pb2.DeadLetter(subject="big", payload=bytes(range(256)) * (3 * max_payload // 256))
        await bus.publish("big.thing", big)
        await until(lambda: len(received) == 1, "the big message")
        assert received[0] == big
        # On the stream: an empty body and a bounded reference to the object.
        raw = await js.get_last_msg(settings.nats.stream, bus.subject("big.thing"))
        reference = raw.headers[PAYLOAD_HEADER]
        assert not raw.data and len(reference) < 200
        bucket, _, name = reference.partition("/")
        assert bucket == f"{settings.nats.stream}-payloads"

        # A reference whose object is gone can never be processed: a dead letter, not a retry loop.
        await (await js.object_store(bucket)).delete(name)
        await bus.broker.publish(b"", bus.subject("big.thing"), headers={PAYLOAD_HEADER: reference},
                                 stream=bus.stream.name)
        await until(lambda: len(letters) == 1, "the dead letter of the missing object")
        assert "is gone" in letters[0].error and letters[0].headers[PAYLOAD_HEADER] == reference
        assert len(received) == 1
    finally:
        await bus.stop()
        await watcher.stop()


async def test_an_object_over_the_message_limit_is_dead_lettered_unfetched(settings: Settings) -> None:
    settings = isolated(settings)
    publisher, watcher = Bus(settings, "publisher"), Bus(settings, "watcher")
    letters: list[events_pb2.DeadLetter] = []
    received: list[str] = []

    @watcher.consumer(f"{Subjects.DLQ}.{Subjects.POLICY_PUBLISHED}", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)

    await publisher.start()
    max_payload = publisher.broker.config.connection_state.connection.max_payload  # type: ignore[attr-defined]
    strict = settings.model_copy(update={"nats": settings.nats.model_copy(update={"max_message_bytes": max_payload})})
    consumer = Bus(strict, "svc")

    @consumer.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        received.append(message.version)

    await consumer.start()
    await watcher.start()
    try:
        huge = events_pb2.PolicyPublished(version="v1", metrics={f"m{i}": 1.0 for i in range(2 * max_payload // 12)})
        await publisher.publish(Subjects.POLICY_PUBLISHED, huge)  # over the consumer's limit, not the publisher's
        await publisher.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="v2"))
        await until(lambda: letters and received, "the dead letter and the next message")
        assert received == ["v2"] and len(letters) == 1
        assert f"over nats.max_message_bytes ({max_payload})" in letters[0].error
        with pytest.raises(ResourceExhausted, match=r"over nats\.max_message_bytes"):
            await consumer.publish(Subjects.POLICY_PUBLISHED, huge)
    finally:
        await consumer.stop()
        await watcher.stop()
        await publisher.stop()


async def test_the_server_bounds_redelivery_too_even_for_a_durable_made_unbounded(settings: Settings) -> None:
    settings = isolated(settings)  # max_deliver=3
    older = Bus(settings, "svc")
    await older.broker.connect()
    await older._ensure_stream()
    js = older.broker.config.connection_state.stream  # type: ignore[attr-defined]
    await js.add_consumer(settings.nats.stream, ConsumerConfig(  # as a release before the bound made it
        durable_name="svc-policy-published", filter_subject=older.subject(Subjects.POLICY_PUBLISHED),
        ack_policy=AckPolicy.EXPLICIT, max_deliver=-1))
    await older.broker.stop()
    bus = Bus(settings, "svc")
    handled: list[str] = []

    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        handled.append(message.version)

    await bus.start()
    try:
        js = bus.broker.config.connection_state.stream  # type: ignore[attr-defined]
        info = await js.consumer_info(settings.nats.stream, "svc-policy-published")
        assert info.config.max_deliver == 4  # one past the bus's own bound: the delivery that dead-letters
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="v1"))
        await until(lambda: handled == ["v1"], "the updated durable to deliver")
    finally:
        await bus.stop()


class Died(BaseException):
    """What a handler's process dying mid-message looks like to the bus: no outcome at all, not even an error."""


async def test_a_message_whose_every_handling_dies_is_dead_lettered_unhandled(settings: Settings) -> None:
    settings = isolated(settings)  # max_deliver=3
    settings = settings.model_copy(update={"nats": settings.nats.model_copy(update={"ack_wait_s": 1.0})})
    bus = Bus(settings, "svc")
    attempts: list[int] = []
    letters: list[events_pb2.DeadLetter] = []

    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        attempts.append(1)
        raise Died

    @bus.consumer(f"{Subjects.DLQ}.{Subjects.POLICY_PUBLISHED}", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)

    await bus.start()
    try:
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="doomed"))
        await until(lambda: letters, "the dead letter", 30)
    finally:
        await bus.stop()
    assert len(attempts) == 3 and letters[0].deliveries == 4  # handled thrice; the server's last one letters it
    assert "delivered 4 times without an outcome" in letters[0].error


async def test_a_stopping_service_leaves_the_bus_before_it_closes_its_parts(settings: Settings) -> None:
    """Events keep arriving while a service stops: none is handed to its consumer once its parts (a store) close,
    where that delivery would fail and count toward the dead letter."""
    settings = isolated(settings)
    log: list[str] = []
    handled = asyncio.Event()

    async def factory(settings: Settings, bus: Bus) -> ServiceParts:
        @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
        async def handle(message: events_pb2.PolicyPublished) -> None:
            log.append("handled")
            handled.set()

        async def close() -> None:
            log.append("closed")
            await asyncio.sleep(1.0)  # a store that takes its time to close

        return ServiceParts(closers=[close])

    running = await start_service("planner", settings, factory)
    producer = Bus(settings, "learner")
    await producer.start()
    try:
        await producer.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="v1"))
        await asyncio.wait_for(handled.wait(), 10)
        stopping = asyncio.create_task(running.stop())
        sent = 1
        while not stopping.done():
            sent += 1
            await producer.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version=f"v{sent}"))
            await asyncio.sleep(0.02)
        await stopping
    finally:
        await producer.stop()
    assert "closed" in log and "handled" not in log[log.index("closed"):], log
