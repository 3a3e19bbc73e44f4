"""The stack's orchestrator worker: every workflow's registration (each folder's worker.py) on one task queue.

One folder per workflow (its workflow, activities, pure logic, worker registration and starter side by side, as
in temporalio's samples); the CLI's clients (progress, reports) are in evoskill.clients. The workflow tests
register each workflow's own registration with test doubles of its activities, and the replay test replays
recorded histories against every workflow.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Worker

from evoskill.orchestrator import registration
from evoskill.orchestrator.exploration.worker import REGISTRATION as EXPLORATION
from evoskill.orchestrator.health.worker import REGISTRATION as HEALTH
from evoskill.orchestrator.training.worker import REGISTRATION as TRAINING
from evoskill.platform.config import Settings

REGISTRATIONS = (HEALTH, TRAINING, EXPLORATION)
WORKFLOWS = [w for r in REGISTRATIONS for w in r.workflows]


def worker(client: Client, settings: Settings) -> Worker:
    return registration.worker(client, settings, REGISTRATIONS)
