"""The main job `evoskill run` starts on the embedded stack: the health check, then a short training run."""

from __future__ import annotations

import uuid

from rich.console import Console
from rich.table import Table

from evoskill.orchestrator.health.workflow import StackHealthWorkflow
from evoskill.orchestrator.training.logic import TrainingParams
from evoskill.platform.config import Settings
from evoskill.platform.temporal import connect

# A few minutes on two cores: MCTS plays the first epoch, θ guides the search from the second.
SHORT_TRAINING = TrainingParams(envs=["twx:coin"], epochs=2, episodes_per_epoch=4, eval_episodes=2, simulations=8,
                                max_steps=12, train_steps=20, parallelism=2)


async def check_stack(settings: Settings, console: Console) -> bool:
    """Every service reports its health through a Temporal workflow (traced: the client carries the interceptor)."""
    client = await connect(settings, attempts=3)
    results = await client.execute_workflow(
        StackHealthWorkflow.run, id=f"stack-health-{uuid.uuid4().hex[:8]}", task_queue=settings.temporal.task_queue
    )
    table = Table("service", "health (via Temporal)")
    for service, ok in results.items():
        table.add_row(service, "[green]SERVING[/green]" if ok else "[red]DOWN[/red]")
    console.print(table)
    return all(results.values())


async def run_main_job(settings: Settings, console: Console, training: TrainingParams | None = SHORT_TRAINING) -> int:
    if not await check_stack(settings, console):
        return 1
    if training is None:
        return 0
    from temporalio.client import WorkflowFailureError

    from evoskill.clients.training import failure_message, run_training

    try:
        await run_training(settings, training, console)
    except WorkflowFailureError as exc:
        console.print(f"[red]training workflow failed:[/red] {failure_message(exc)}")
        return 1
    return 0
