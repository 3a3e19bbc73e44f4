"""The orchestrator process: a Temporal worker for evoskill's workflows, plus gRPC health."""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Worker

from evoskill.orchestrator.exploration_activities import ExplorationActivities
from evoskill.orchestrator.exploration_workflow import ExplorationWorkflow
from evoskill.orchestrator.health_workflow import StackHealthWorkflow, check_service_health
from evoskill.orchestrator.training_activities import TrainingActivities
from evoskill.orchestrator.training_workflow import TrainingWorkflow
from evoskill.platform.bus import Bus
from evoskill.platform.config import Settings
from evoskill.platform.service import ServiceParts

log = logging.getLogger(__name__)

WORKFLOWS = [StackHealthWorkflow, TrainingWorkflow, ExplorationWorkflow]
ACTIVITIES = [check_service_health]


async def connect(settings: Settings, attempts: int = 30) -> Client:
    """Connect to Temporal, waiting for a server that is still starting."""
    for attempt in range(attempts):
        try:
            return await Client.connect(
                settings.temporal_address, namespace=settings.temporal.namespace, interceptors=[TracingInterceptor()]
            )
        except RuntimeError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    raise RuntimeError("unreachable")


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    client = await connect(settings)
    activities = [*ACTIVITIES, *TrainingActivities(settings).all(), *ExplorationActivities(settings).all()]
    worker = Worker(client, task_queue=settings.temporal.task_queue, workflows=WORKFLOWS, activities=activities)

    async def run_worker() -> None:
        await worker.run()

    async def shutdown() -> None:
        await worker.shutdown()

    return ServiceParts(background=[run_worker], closers=[shutdown])
