"""Running an ExplorationWorkflow: `evoskill explore` does it through this; `python -m
evoskill.orchestrator.exploration.starter CANDIDATE ENV [ENV ...]` tries a policy version with the default
stages and prints the decisions."""

from __future__ import annotations

import asyncio
import sys

from temporalio.client import Client

from evoskill.orchestrator.exploration.logic import ExplorationInput, ExplorationParams, ExplorationResult
from evoskill.orchestrator.exploration.workflow import ExplorationWorkflow
from evoskill.platform.config import Settings
from evoskill.platform.temporal import connect, exit_process, workflow_id


async def explore(client: Client, settings: Settings, params: ExplorationParams, workflow_id: str) -> ExplorationResult:
    return await client.execute_workflow(
        ExplorationWorkflow.run, ExplorationInput(params), id=workflow_id, task_queue=settings.temporal.task_queue
    )


async def main(candidate: str, envs: list[str]) -> None:
    settings = Settings()
    result = await explore(
        await connect(settings, attempts=3),
        settings,
        ExplorationParams(candidate=candidate, envs=envs),
        workflow_id("explore"),
    )
    print("\n".join(result.decisions))
    print(f"{result.outcome}: {result.candidate} vs baseline {result.baseline}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m evoskill.orchestrator.exploration.starter CANDIDATE ENV [ENV ...]")
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
    exit_process(0)
