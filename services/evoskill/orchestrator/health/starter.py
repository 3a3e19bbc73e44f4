"""Running StackHealthWorkflow: `make run`'s main job does it first (evoskill.clients.jobs);
`python -m evoskill.orchestrator.health.starter` prints each service's health and exits 1 if one is down."""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from evoskill.orchestrator.health.workflow import StackHealthWorkflow
from evoskill.platform.config import Settings
from evoskill.platform.temporal import connect, exit_process, workflow_id


async def check_health(client: Client, settings: Settings) -> dict[str, bool]:
    return await client.execute_workflow(
        StackHealthWorkflow.run, id=workflow_id("stack-health"), task_queue=settings.temporal.task_queue
    )


async def main() -> int:
    settings = Settings()
    results = await check_health(await connect(settings, attempts=3), settings)
    for service, ok in results.items():
        print(f"{service}: {'SERVING' if ok else 'DOWN'}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    exit_process(asyncio.run(main()))
