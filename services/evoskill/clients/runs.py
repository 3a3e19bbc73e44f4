"""The client side of `evoskill runs` and `evoskill train --detach`: training runs (TrainingWorkflows) on the
stack's Temporal, found, described and signalled through the Temporal client.

A run is named by its workflow id (`train-<hex>`); handles carry no run id, so each call follows the id's
latest run through continue-as-new. Progress and per-epoch results come from the workflow's `progress` query
(an orchestrator worker answers it); the parameters from the run's start event (no worker needed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from evoskill.clients.training import query_progress
from evoskill.orchestrator.training.logic import TrainingInput, TrainingParams, TrainingProgress, TrainingResult
from evoskill.orchestrator.training.starter import start_training
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import Settings
from evoskill.platform.temporal import workflow_id as new_id

Handle = WorkflowHandle[TrainingWorkflow, TrainingResult]
WORKFLOW_TYPE = "TrainingWorkflow"


class RunsError(Exception):
    """One line for the user, with the exit status: 2 for a bad argument, 1 for a state that refuses it."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Run:
    """One row of `evoskill runs list`: a workflow id's latest run, started when its chain first started."""

    run_id: str
    status: str
    started: datetime | None
    task_queue: str
    progress: TrainingProgress | None = None


def status_name(value: WorkflowExecutionStatus | None) -> str:
    return value.name.lower() if value is not None else "unknown"


def shown_status(status: str, progress: TrainingProgress | None) -> str:
    """The status with what the progress query adds while it runs (paused, stopping)."""
    if progress is not None and progress.phase != "done":
        if progress.paused:
            return f"{status} (paused)"
        if progress.stopping:
            return f"{status} (stopping after this epoch)"
    return status


async def client_for(settings: Settings) -> Client:
    """The Temporal client of the stack on `settings`; RunsError when nothing answers there."""
    from evoskill.platform.temporal import connect
    from evoskill.stack.supervisor import tcp_open

    host, _, port = settings.temporal_address.rpartition(":")
    if not await tcp_open(host, int(port)):
        raise RunsError(f"no Temporal answers at {settings.temporal_address} (no stack is running on "
                        f"{settings.state_dir.resolve()}?): `evoskill up --detach` starts one")
    try:
        return await connect(settings, attempts=3)
    except RuntimeError as exc:
        raise RunsError(f"cannot reach Temporal at {settings.temporal_address}: {exc}") from exc


async def list_runs(client: Client, limit: int, running_only: bool = False) -> list[Run]:
    """The `limit` most recently started runs, newest first, with the progress of those running."""
    query = f"WorkflowType = '{WORKFLOW_TYPE}'" + (" AND ExecutionStatus = 'Running'" if running_only else "")
    runs: dict[str, Run] = {}
    async for execution in client.list_workflows(query):  # one per run of a continue-as-new chain
        run = runs.get(execution.id)
        if run is None:  # visibility lists the latest run of an id first
            runs[execution.id] = Run(execution.id, status_name(execution.status), execution.start_time,
                                     execution.task_queue)
        elif execution.start_time and (run.started is None or execution.start_time < run.started):
            run.started = execution.start_time
    newest = sorted(runs.values(), key=lambda r: r.started or datetime.min, reverse=True)[:limit]
    running = [r for r in newest if r.status == "running"]
    answers = await asyncio.gather(*(query_progress(handle(client, r.run_id)) for r in running))
    for run, progress in zip(running, answers, strict=True):
        run.progress = progress
    return newest


def handle(client: Client, run_id: str) -> Handle:
    return client.get_workflow_handle_for(TrainingWorkflow.run, run_id)


async def find(client: Client, run_id: str) -> tuple[Handle, WorkflowExecutionStatus | None]:
    """The run's handle and its latest run's status; RunsError (2) when no training run has this id."""
    found = handle(client, run_id)
    try:
        described = await found.describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise RunsError(f"no training run {run_id!r} on {client.service_client.config.target_host}: "
                            "`evoskill runs list` shows the runs", 2) from exc
        raise
    if described.workflow_type != WORKFLOW_TYPE:
        raise RunsError(f"{run_id!r} is a {described.workflow_type}, not a training run", 2)
    return found, described.status


async def params_of(client: Client, run: Handle) -> TrainingParams:
    """The run's parameters, from its latest run's start event (continue-as-new hands them on unchanged)."""
    history = await run.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    (start,) = await client.data_converter.decode(started.input.payloads, [TrainingInput])
    assert isinstance(start, TrainingInput)
    return start.params


async def signal(client: Client, run_id: str, name: str) -> None:
    """Send `name` (pause, resume, stop) to a running run, or cancel it ("cancel"); RunsError (1) when the run
    has ended."""
    run, status = await find(client, run_id)
    if status is not WorkflowExecutionStatus.RUNNING:
        raise RunsError(f"run {run_id} is {status_name(status)}: only a running run can be {DONE[name]}")
    if name == "cancel":
        await run.cancel()
    else:
        await run.signal(getattr(TrainingWorkflow, name))


DONE = {"pause": "paused", "resume": "resumed", "stop": "stopped", "cancel": "cancelled"}


async def start_detached(settings: Settings, params: TrainingParams, workflow_id: str | None,
                         say: Callable[[str], None] = print) -> str:
    """Start the TrainingWorkflow on the running stack and return its id. The run outlives the command, so a
    stack must already run: none is brought up for it (as `evoskill train` does)."""
    from evoskill.platform.rpc import check_health
    from evoskill.stack.running import wait_for_stack

    planner = settings.endpoint("planner").target
    if await wait_for_stack(settings, say) is None and not await check_health(planner, settings=settings.grpc):
        raise RunsError("--detach needs a running stack (the run outlives this command): `evoskill up --detach` "
                        f"starts one on {settings.state_dir.resolve()}")
    client = await client_for(settings)
    workflow_id = workflow_id or new_id("train")
    try:
        await start_training(client, settings, params, workflow_id)
    except WorkflowAlreadyStartedError as exc:
        raise RunsError(f"--workflow-id {workflow_id!r} is taken by a running run (`evoskill runs show "
                        f"{workflow_id}`)", 2) from exc
    return workflow_id
