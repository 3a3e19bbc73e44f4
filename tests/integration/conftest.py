"""Fixtures of the integration tests: the episode services (sandbox, reward, planner), and for the training
workflow tests one stack of real services per module (see training_stack)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from evoskill.platform import metrics
from evoskill.platform.config import Settings
from evoskill.platform.service import start_service
from tests.conftest import make_settings
from tests.integration.test_bus import isolated
from tests.integration.training_stack import Stack


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    """The service metrics recorded from now on, read in memory."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.use_meter_provider(provider)
    yield reader
    metrics.use_meter_provider(None)
    provider.shutdown()


@pytest.fixture
async def services(settings: Settings) -> AsyncIterator[Settings]:
    """Sandbox, reward and planner on the session's servers: what plays an episode."""
    settings = isolated(settings)
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "planner")]
    yield settings
    for service in reversed(running):
        await service.stop()


@pytest.fixture(scope="module")
async def running(tmp_path_factory: pytest.TempPathFactory, nats_url: str,
                  temporal_address: str) -> AsyncIterator[Stack]:
    """One set of services for the module (starting the learner's torch is the slow part)."""
    base = make_settings(tmp_path_factory.mktemp("training"))
    settings = isolated(base.model_copy(update={
        "nats": base.nats.model_copy(update={"url": nats_url}),
        # Own task queue: a workflow left over by another module never lands on this worker.
        "temporal": base.temporal.model_copy(update={"address": temporal_address,
                                                     "task_queue": f"train-{uuid.uuid4().hex[:8]}"}),
    }))
    stack = Stack(settings)
    await stack.start()
    yield stack
    await stack.stop()


@pytest.fixture
async def stack(running: Stack) -> Stack:
    # A failed restart test must not take the worker or the learner from the next test.
    if running.learner_service is None:
        await running.start_learner()
    if running.worker is None:
        await running.start_worker()
    return running
