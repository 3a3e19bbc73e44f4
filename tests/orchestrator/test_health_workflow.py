"""StackHealthWorkflow on the time-skipping server, its activity a test double: every service asked once, in
order, and a service that is down is reported as such rather than failing the workflow."""

from __future__ import annotations

import uuid

from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from evoskill.orchestrator.health.worker import REGISTRATION as HEALTH
from evoskill.orchestrator.health.workflow import StackHealthWorkflow
from evoskill.platform.config import SERVICES
from tests.orchestrator.conftest import worker
from tests.orchestrator.histories import keep


async def test_every_service_is_asked_once_and_a_down_one_is_reported(env: WorkflowEnvironment) -> None:
    asked: list[str] = []

    @activity.defn(name="check_service_health")
    async def check(service: str) -> bool:
        asked.append(service)
        return service != "memory"  # the memory service does not answer

    async with worker(env, HEALTH, [check]) as task_queue:
        handle = await env.client.start_workflow(StackHealthWorkflow.run, id=f"health-{uuid.uuid4().hex[:8]}",
                                                 task_queue=task_queue)
        result = await handle.result()
    assert asked == list(SERVICES)
    assert result == {service: service != "memory" for service in SERVICES}
    await keep(handle, "health_memory_down")
