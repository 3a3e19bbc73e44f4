"""The TrainingWorkflow's activities: play one episode through the planner, build the learner's offline
library from the environment's gold paths, train through the learner, record an epoch's metrics. They hold
the worker's settings (bound methods), so a worker started on other ports (tests, containers) reaches its
own services.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
from temporalio import activity
from temporalio.exceptions import ApplicationError

from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.orchestrator.training.logic import (
    EpisodeResult,
    EpisodeTask,
    EpochMetrics,
    LibraryResult,
    LibraryTask,
    TrainResult,
    TrainTask,
)
from evoskill.orchestrator.training.report import record_metrics
from evoskill.planner.client import episode_request, play
from evoskill.platform.beats import beating
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel

INT_FIELDS = ("rollout_depth", "num_simulations", "max_children", "batch_size")
# Retrying cannot fix these: the workflow fails at once, naming the problem.
NON_RETRYABLE = {grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument", grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
                 grpc.StatusCode.NOT_FOUND: "NotFound"}


def rpc_failure(what: str, exc: grpc.aio.AioRpcError) -> ApplicationError:
    kind = NON_RETRYABLE.get(exc.code())
    return ApplicationError(f"{what}: {exc.code().name}: {exc.details()}", type=kind or exc.code().name,
                            non_retryable=kind is not None)


@contextlib.asynccontextmanager
async def heartbeats() -> AsyncIterator[None]:
    """Heartbeat while a long call runs, so that a worker that died is noticed in a heartbeat timeout."""
    timeout = activity.info().heartbeat_timeout
    period = max(0.5, timeout.total_seconds() / 3) if timeout else 10.0

    async with beating(period, activity.heartbeat):
        yield


class TrainingActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @activity.defn(name="training.play_episode")
    async def play_episode(self, task: EpisodeTask) -> EpisodeResult:
        """One episode with a fixed id: a retry plays it again under the same id (the learner keys replay by it)."""
        search: dict[str, Any] = {k: (round(v) if k in INT_FIELDS else v) for k, v in task.search.items()}
        if task.algorithm:
            search["algorithm"] = task.algorithm
        request = episode_request(task.env, task.seed, task.fold, task.agent, task.simulations, task.max_steps,
                                  policy_version=task.policy_version, **search)
        request.episode_id, request.workflow_id = task.episode_id, activity.info().workflow_id or ""
        # Creating the session can take seconds (an environment's JVM); keep the heartbeat alive meanwhile.
        try:
            async with heartbeats():
                outcome = await play(self.settings, request, lambda update: activity.heartbeat(update.step_index))
        except grpc.aio.AioRpcError as exc:
            raise rpc_failure(f"episode {task.episode_id} ({task.env} seed {task.seed})", exc) from exc
        except asyncio.CancelledError:
            if activity.is_worker_shutdown():
                # Report a failure, not a cancellation, so the server retries it on another worker.
                raise ApplicationError(f"worker shut down during episode {task.episode_id}",
                                       type="WorkerShutdown") from None
            raise
        return EpisodeResult(task.episode_id, task.env, task.seed, outcome.won, outcome.score, outcome.total_reward,
                             outcome.steps, outcome.env_steps)

    @activity.defn(name="training.train_policy")
    async def train_policy(self, task: TrainTask) -> TrainResult:
        """Train θ on replay once this epoch's episodes have arrived there.
        A retry (this worker died after the learner finished) sends the same request id and gets that version."""
        request = learner_pb2.TrainRequest(steps=task.steps, batch_size=task.batch_size, seed=task.seed,
                                           episode_ids=task.episode_ids, wait_seconds=task.wait_seconds,
                                           request_id=task.request_id, online_fraction=task.online_fraction,
                                           from_version=task.from_version)
        async with channel(self.settings.endpoint("learner").target, self.settings.grpc) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            try:
                async with heartbeats():
                    reply = await stub.Train(request, timeout=task.wait_seconds + 3600)
            except grpc.aio.AioRpcError as exc:
                raise rpc_failure("learner Train", exc) from exc
        return TrainResult(reply.policy_version, dict(reply.losses), reply.samples)

    @activity.defn(name="training.build_library")
    async def build_library(self, task: LibraryTask) -> LibraryResult:
        """Gold paths played straight from the environment adapters in `workers` processes (`evoskill demos`:
        the planner's demo agent, in-process, so without a JVM start per game), streamed into the learner's
        offline library. Idempotent: a game's episode id is fixed, so a retry stores nothing twice."""
        from evoskill.library.cli import send_to_learner
        from evoskill.library.generate import Throughput, generate

        tally = Throughput()
        by_env: dict[str, list[int]] = {}
        for t in task.tasks:
            by_env.setdefault(t.env, []).append(t.seed)
        played = (episode for env, seeds in by_env.items()
                  for episode in generate(env, task.fold, seeds, workers=task.workers, settings=self.settings,
                                          throughput=tally))
        async with channel(self.settings.endpoint("learner").target, self.settings.grpc) as ch:
            try:
                async with heartbeats():
                    reply = await send_to_learner(learner_pb2_grpc.LearnerServiceStub(ch), played)
            except grpc.aio.AioRpcError as exc:
                raise rpc_failure("learner ImportEpisodes", exc) from exc
        return LibraryResult(tally.episodes, tally.won, tally.steps, reply.stored, reply.library_episodes,
                             reply.library_steps)

    @activity.defn(name="training.record_epoch")
    async def record_epoch(self, workflow_id: str, directory: str, metrics: EpochMetrics) -> str:
        """Append the epoch to metrics.jsonl and TensorBoard under the run's folder; returns the folder."""
        folder = Path(directory) if directory else self.settings.state_dir / "train" / workflow_id
        await asyncio.to_thread(record_metrics, folder, metrics)
        return str(folder.resolve())

    def all(self) -> list[Callable[..., Any]]:
        return [self.play_episode, self.build_library, self.train_policy, self.record_epoch]
