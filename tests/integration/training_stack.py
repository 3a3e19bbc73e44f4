"""The services a TrainingWorkflow needs, started in-process on the real servers, and helpers to drive one.

Shared by the training workflow tests (the fixtures that start it are in this folder's conftest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio.client import Client, WorkflowHandle

from evoskill.events.v1 import events_pb2
from evoskill.learner.servicer import LearnerServicer
from evoskill.orchestrator.training.logic import TrainingParams, TrainingProgress, TrainingResult, episode_id
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.service import RunningService, start_service

Handle = WorkflowHandle[TrainingWorkflow, TrainingResult]


def tiny(**overrides: object) -> TrainingParams:
    fields: dict[str, object] = {"envs": ["twx:coin"], "epochs": 1, "episodes_per_epoch": 2, "eval_episodes": 1,
                                 "simulations": 4, "max_steps": 4, "train_steps": 2, "batch_size": 8,
                                 "parallelism": 2, "heartbeat_timeout_s": 20.0, "train_wait_s": 30.0}
    fields.update(overrides)
    return TrainingParams(**fields)  # type: ignore[arg-type]


class Stack:
    """sandbox, reward, planner, learner and the orchestrator's worker, plus a watcher of episode.completed."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.services: list[RunningService] = []  # sandbox, reward, planner
        self.learner_service: RunningService | None = None
        self.learner: LearnerServicer | None = None
        self.worker: RunningService | None = None
        self.completed: list[str] = []
        self.watcher = Bus(settings, "watcher")

        @self.watcher.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
        async def on_episode(event: events_pb2.EpisodeCompleted) -> None:
            self.completed.append(event.episode_id)

    async def start(self) -> None:
        await self.watcher.start()
        for name in ("sandbox", "reward", "planner"):
            self.services.append(await start_service(name, self.settings))
        await self.start_learner()
        await self.start_worker()

    async def start_learner(self) -> None:
        """A learner on the stack's state folder: a restart picks up its replay, checkpoint and registry."""
        self.learner_service = await start_service("learner", self.settings)
        learner = self.learner_service.parts.registrations[0][1]
        assert isinstance(learner, LearnerServicer)
        self.learner = learner

    async def stop_learner(self, grace_s: float | None = None) -> None:
        """Stop the learner; `grace_s=0` cancels its in-flight calls at once, as a crash would."""
        assert self.learner_service is not None
        if grace_s is not None:
            self.learner_service.server.grace_s = grace_s
        await self.learner_service.stop()
        self.learner_service = None

    async def start_worker(self) -> None:
        self.worker = await start_service("orchestrator", self.settings)

    async def stop_worker(self) -> None:
        assert self.worker is not None
        await self.worker.stop()
        self.worker = None

    async def stop(self) -> None:
        if self.worker is not None:
            await self.stop_worker()
        if self.learner_service is not None:
            await self.stop_learner()
        for service in reversed(self.services):
            await service.stop()
        await self.watcher.stop()


async def client_of(settings: Settings) -> Client:
    return await Client.connect(settings.temporal_address, namespace=settings.temporal.namespace)


async def wait_for(handle: Handle, condition: Callable[[TrainingProgress], bool], within_s: float = 60.0,
                   what: str = "progress") -> TrainingProgress:
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        progress = await handle.query(TrainingWorkflow.progress)
        if condition(progress):
            return progress
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{what} not reached; last progress: {progress}")
        await asyncio.sleep(0.1)


def expected_ids(workflow_id: str, params: TrainingParams) -> set[str]:
    return {episode_id(workflow_id, epoch, "t", i) for epoch in range(params.epochs)
            for i in range(params.episodes_per_epoch)}
