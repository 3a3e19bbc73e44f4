"""Starting a TrainingWorkflow. `evoskill train` and `make run`'s main job start it through this (and follow its
progress, evoskill.clients.training); `python -m evoskill.orchestrator.training.starter ENV [ENV ...]` starts a run
with the default parameters on those environments and prints its result."""

from __future__ import annotations

import asyncio
import sys

from temporalio.client import Client, WorkflowHandle

from evoskill.orchestrator.training.logic import TrainingInput, TrainingParams, TrainingResult
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import Settings
from evoskill.platform.temporal import connect, exit_process, workflow_id


async def start_training(
    client: Client, settings: Settings, params: TrainingParams, workflow_id: str
) -> WorkflowHandle[TrainingWorkflow, TrainingResult]:
    await client.start_workflow(
        TrainingWorkflow.run, TrainingInput(params), id=workflow_id, task_queue=settings.temporal.task_queue
    )
    # No run id: queries and the result follow the chain of continue-as-new runs.
    return client.get_workflow_handle_for(TrainingWorkflow.run, workflow_id)


async def main(envs: list[str]) -> None:
    settings = Settings()
    handle = await start_training(
        await connect(settings, attempts=3), settings, TrainingParams(envs=envs), workflow_id("train")
    )
    print(f"started {handle.id}")
    result = await handle.result()
    print(f"{result.epochs_completed} epochs, policy {result.policy_version or 'none'}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or ["twx:coin"]))
    exit_process(0)
