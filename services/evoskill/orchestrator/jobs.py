"""The main job `evoskill run` starts on the embedded stack."""

from __future__ import annotations

import uuid

from rich.console import Console
from rich.table import Table
from temporalio.client import Client

from evoskill.orchestrator.health_workflow import StackHealthWorkflow
from evoskill.platform.config import Settings


async def run_main_job(settings: Settings, console: Console) -> int:
    """Until the training loop lands: every service reports its health through a Temporal workflow."""
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal.namespace)
    results = await client.execute_workflow(
        StackHealthWorkflow.run, id=f"stack-health-{uuid.uuid4().hex[:8]}", task_queue=settings.temporal.task_queue
    )
    table = Table("service", "health (via Temporal)")
    for service, ok in results.items():
        table.add_row(service, "[green]SERVING[/green]" if ok else "[red]DOWN[/red]")
    console.print(table)
    return 0 if all(results.values()) else 1
