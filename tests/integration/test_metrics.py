"""Service metrics over real servers: gRPC calls by method and status, bus outcomes, consumer lag."""

from __future__ import annotations

import asyncio
import importlib.metadata
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput
from evoskill.events.v1 import events_pb2
from evoskill.platform import metrics
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel, start_server
from evoskill.reward.service import SERVICE_NAME, RewardServicer
from evoskill.reward.v1 import reward_pb2, reward_pb2_grpc
from tests.integration.test_bus import isolated
from tests.integration.waiting import until

pytestmark = pytest.mark.integration


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    found: list[Any] = []
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend(metric.data.data_points)
    return found


def value(reader: InMemoryMetricReader, name: str, **attributes: object) -> Any:
    """The one data point of `name` whose attributes include `attributes` (None when there is none)."""
    matching = [p for p in points(reader, name) if all(p.attributes.get(k) == v for k, v in attributes.items())]
    assert len(matching) <= 1, matching
    return matching[0] if matching else None


async def test_grpc_calls_are_counted_by_method_and_status_and_timed(reader: InMemoryMetricReader,
                                                                     settings: Settings) -> None:
    server = await start_server([(reward_pb2_grpc.add_RewardServiceServicer_to_server, RewardServicer(settings),
                                  SERVICE_NAME)], "127.0.0.1:0")
    target = f"127.0.0.1:{server.port}"
    good = common_pb2.Transition(episode_id="e1", action=common_pb2.Action(text="take coin"))
    try:
        async with channel(target) as ch:
            stub = reward_pb2_grpc.RewardServiceStub(ch)
            await stub.Score(reward_pb2.ScoreRequest(transition=good))
            await stub.Score(reward_pb2.ScoreRequest(transition=good))
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Score(reward_pb2.ScoreRequest(transition=common_pb2.Transition(episode_id="e1")))
            # A server stream the client walks away from ends CANCELLED.
            watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""))
            await watch.read()
            watch.cancel()
        score = {"rpc.service": SERVICE_NAME, "rpc.method": "Score"}
        watched = {"rpc.service": "grpc.health.v1.Health", "rpc.method": "Watch"}
        await until(lambda: value(reader, metrics.RPC_REQUESTS, **watched) is not None, "the call's counter", 10)
    finally:
        await server.stop()

    assert value(reader, metrics.RPC_REQUESTS, **score, **{"rpc.grpc.status_code": "OK"}).value == 2
    assert value(reader, metrics.RPC_REQUESTS, **score, **{"rpc.grpc.status_code": "INVALID_ARGUMENT"}).value == 1
    assert value(reader, metrics.RPC_REQUESTS, **watched).attributes["rpc.grpc.status_code"] == "CANCELLED"
    latency = value(reader, metrics.RPC_DURATION, **score)
    assert latency.count == 3 and 0 < latency.sum < 5
    assert "rpc.grpc.status_code" not in latency.attributes


async def test_consumer_counts_outcomes_and_times_handling(reader: InMemoryMetricReader, settings: Settings) -> None:
    settings = isolated(settings)  # max_deliver=3: "flaky" is retried once, "bad" dead-lettered at once
    bus = Bus(settings, "svc")
    attempts: dict[str, int] = {}

    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        attempts[message.version] = attempts.get(message.version, 0) + 1
        if message.version == "bad":
            raise InvalidInput("not a version")
        if message.version == "flaky" and attempts["flaky"] < 2:
            raise ConnectionError("downstream briefly unavailable")

    subject = bus.subject(Subjects.POLICY_PUBLISHED)
    of = {"messaging.destination.name": subject, "messaging.consumer.group.name": "svc-policy-published"}

    def count(outcome: str) -> int:
        point = value(reader, metrics.BUS_MESSAGES, **of, outcome=outcome)
        return int(point.value) if point else 0

    await bus.start()
    try:
        for version in ("a", "bad", "flaky", "b"):
            await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version=version))
        await bus.broker.publish(b"\xff\xff", subject, stream=bus.stream.name)  # undecodable
        await until(lambda: count(metrics.OK) == 3 and count(metrics.DEAD_LETTERED) == 2, "outcome counts", 10)
    finally:
        await bus.stop()
    assert count(metrics.RETRY) == 1
    handling = value(reader, metrics.BUS_DURATION, **of)
    assert handling.count == 6  # every delivery, retries included


async def test_lag_gauge_reports_what_a_busy_consumer_has_not_acknowledged(reader: InMemoryMetricReader,
                                                                            settings: Settings) -> None:
    settings = isolated(settings)
    bus = Bus(settings, "slow", lag_interval_s=0.1)
    release = asyncio.Event()

    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)
    async def handle(message: events_pb2.PolicyPublished) -> None:
        await release.wait()

    of = {"messaging.nats.stream": bus.stream.name, "messaging.consumer.group.name": "slow-policy-published",
          "messaging.destination.name": bus.subject(Subjects.POLICY_PUBLISHED)}

    def lag() -> int | None:
        point = value(reader, metrics.BUS_LAG, **of)
        return None if point is None else int(point.value)

    await bus.start()
    try:
        await until(lambda: lag() == 0, "lag 0", 10)
        for version in range(5):
            await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version=str(version)))
        await until(lambda: lag() == 5, "lag 5", 10)  # the handler holds the first: none acknowledged
        release.set()
        await until(lambda: lag() == 0, "lag 0", 10)
    finally:
        release.set()
        await bus.stop()
    assert lag() is None  # a stopped consumer reports nothing rather than a stale value


def test_telemetry_resource_names_the_service_and_the_installed_version(spans) -> None:  # type: ignore[no-untyped-def]
    resource = trace.get_tracer_provider().resource  # type: ignore[attr-defined]
    assert str(resource.attributes["service.name"]).startswith("evoskill-")
    assert resource.attributes["service.version"] == importlib.metadata.version("evoskill")
