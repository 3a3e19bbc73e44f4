"""What a worker registers for one workflow (its workflow classes and its activities, bound to the settings that
say where the services are), and a worker for any set of them: the stack's orchestrator registers them all
(orchestrator/worker.py), `python -m evoskill.orchestrator.WORKFLOW.worker` one alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from evoskill.platform.config import Settings
from evoskill.platform.temporal import connect


@dataclass(frozen=True)
class Registration:
    workflows: tuple[type, ...]
    activities: Callable[[Settings], list[Callable[..., Any]]]


def activities(settings: Settings, registrations: Sequence[Registration]) -> list[Callable[..., Any]]:
    """Every registration's activities, an activity two workflows run (the exploration plays its episodes with the
    training's play_episode) once: one implementation per name."""
    by_name = {(a.__module__, a.__qualname__): a for r in registrations for a in r.activities(settings)}
    return list(by_name.values())


def worker(client: Client, settings: Settings, registrations: Sequence[Registration]) -> Worker:
    return Worker(client, task_queue=settings.temporal.task_queue,
                  workflows=[w for r in registrations for w in r.workflows],
                  activities=activities(settings, registrations))


def serve(registration: Registration) -> None:
    """Run a worker for this workflow alone on the settings' task queue, until interrupted."""

    async def main() -> None:
        settings = Settings()
        await worker(await connect(settings, attempts=3), settings, [registration]).run()

    asyncio.run(main())
