"""Test doubles of the orchestrator's activities, registered under the real activity names.

Each records what the workflow asked for and answers from the test's script: episode outcomes by policy
version or by task, a learner that numbers its versions, a serving pointer that promote and roll_back move.
`hold` makes matching episodes wait until the test releases them, so a test can act while one is in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.exceptions import ApplicationError

from evoskill.orchestrator.exploration.logic import Resolved, ShadowEpisode, ShadowStep, ShadowTask
from evoskill.orchestrator.training.logic import (
    EpisodeResult,
    EpisodeTask,
    EpochMetrics,
    LibraryResult,
    LibraryTask,
    TrainResult,
    TrainTask,
)


@dataclass
class Outcome:
    won: bool
    reward: float


class Episodes:
    """training.play_episode: every attempt recorded; the outcome comes from `outcome(task)`."""

    def __init__(self, outcome: Callable[[EpisodeTask], Outcome]) -> None:
        self.outcome = outcome
        self.attempts: list[EpisodeTask] = []
        self.fail_first: set[str] = set()   # episode ids whose first attempt fails (a worker lost mid-episode)
        self.hold: Callable[[EpisodeTask], bool] = lambda task: False
        self.release = asyncio.Event()
        self.started: asyncio.Queue[EpisodeTask] = asyncio.Queue()   # held episodes, as they start

    @activity.defn(name="training.play_episode")
    async def play_episode(self, task: EpisodeTask) -> EpisodeResult:
        self.attempts.append(task)
        if task.episode_id in self.fail_first and activity.info().attempt == 1:
            raise ApplicationError(f"worker lost during {task.episode_id}")
        if self.hold(task):
            self.started.put_nowait(task)
            await self.release.wait()
        result = self.outcome(task)
        return EpisodeResult(task.episode_id, task.env, task.seed, result.won, float(result.won), result.reward,
                             steps=3, env_steps=3)

    async def next_held(self) -> EpisodeTask:
        return await asyncio.wait_for(self.started.get(), 30)


class Training(Episodes):
    """The TrainingWorkflow's activities: each Train makes the next version."""

    def __init__(self, outcome: Callable[[EpisodeTask], Outcome]) -> None:
        super().__init__(outcome)
        self.trained: list[TrainTask] = []
        self.recorded: list[tuple[str, EpochMetrics]] = []
        self.libraries: list[LibraryTask] = []

    @activity.defn(name="training.build_library")
    async def build_library(self, task: LibraryTask) -> LibraryResult:
        """Every gold path wins in 5 steps and is new."""
        self.libraries.append(task)
        n = len(task.tasks)
        return LibraryResult(n, n, 5 * n, n, n, 5 * n)

    @activity.defn(name="training.train_policy")
    async def train_policy(self, task: TrainTask) -> TrainResult:
        self.trained.append(task)
        return TrainResult(f"v{len(self.trained):06d}", {"loss": 1.0 / len(self.trained)}, 8 * len(task.episode_ids))

    @activity.defn(name="training.record_epoch")
    async def record_epoch(self, workflow_id: str, directory: str, metrics: EpochMetrics) -> str:
        self.recorded.append((workflow_id, metrics))
        return directory

    def all(self) -> list[Callable[..., object]]:
        return [self.play_episode, self.build_library, self.train_policy, self.record_epoch]


@dataclass
class Registry:
    """The learner's serving pointer as the exploration activities see it."""

    serving: str
    published: list[str]
    changes: list[tuple[str, str, str]] = field(default_factory=list)   # (action, version now serving, reason)


class Exploration(Episodes):
    """The ExplorationWorkflow's activities: episodes play the version asked for ("" = the serving one)."""

    def __init__(self, registry: Registry, rewards: dict[str, float], shadow_valid: bool = True) -> None:
        super().__init__(lambda task: self._by_version(task))
        self.registry = registry
        self.rewards = rewards
        self.shadow_valid = shadow_valid
        self.shadowed: list[ShadowTask] = []

    def _by_version(self, task: EpisodeTask) -> Outcome:
        reward = self.rewards[task.policy_version or self.registry.serving]
        return Outcome(reward > 0, reward)

    @activity.defn(name="exploration.resolve")
    async def resolve(self, candidate: str, baseline: str) -> Resolved:
        r = self.registry
        return Resolved(candidate, baseline or r.serving, r.serving, r.published[-1])

    @activity.defn(name="exploration.promote")
    async def promote(self, version: str, reason: str) -> str:
        previous, self.registry.serving = self.registry.serving, version
        self.registry.changes.append(("promote", version, reason))
        return previous

    @activity.defn(name="exploration.roll_back")
    async def roll_back(self, candidate: str, baseline: str, reason: str) -> str:
        if self.registry.serving == candidate:
            self.registry.serving = baseline
            self.registry.changes.append(("roll_back", baseline, reason))
        return self.registry.serving

    @activity.defn(name="exploration.shadow_episode")
    async def shadow_episode(self, task: ShadowTask) -> ShadowEpisode:
        """Three steps the baseline won; the candidate agrees, or picks an action that is not valid."""
        self.shadowed.append(task)
        choice = "go east" if self.shadow_valid else "fly away"
        steps = [ShadowStep("go east", choice, self.shadow_valid, 0.5, 0.6) for _ in range(3)]
        return ShadowEpisode(task.episode_id, task.env, task.seed, True, 3.0, steps)

    def all(self) -> list[Callable[..., object]]:
        return [self.play_episode, self.resolve, self.promote, self.roll_back, self.shadow_episode]
