"""The orchestrator's worker registration, in one place: every workflow and the activities they run.

One folder per workflow (its workflow, activities and pure logic side by side, as in temporalio's samples);
the CLI's starters are in evoskill.clients. The workflow tests register these workflows with test doubles of
the activities, and the replay test replays recorded histories against them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from evoskill.orchestrator.exploration.activities import ExplorationActivities
from evoskill.orchestrator.exploration.workflow import ExplorationWorkflow
from evoskill.orchestrator.health.workflow import StackHealthWorkflow, check_service_health
from evoskill.orchestrator.training.activities import TrainingActivities
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import Settings

WORKFLOWS = [StackHealthWorkflow, TrainingWorkflow, ExplorationWorkflow]


def activities(settings: Settings) -> list[Callable[..., Any]]:
    """The real activities, bound to the worker's settings (where the services are)."""
    return [check_service_health, *TrainingActivities(settings).all(), *ExplorationActivities(settings).all()]


def worker(client: Client, settings: Settings) -> Worker:
    return Worker(client, task_queue=settings.temporal.task_queue, workflows=WORKFLOWS,
                  activities=activities(settings))
