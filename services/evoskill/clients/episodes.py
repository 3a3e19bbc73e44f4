"""Clients of the planner for `evoskill solve` and `evoskill eval`: play episodes, summarise them."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import Settings
from evoskill.platform.replicas import pick
from evoskill.platform.rpc import channel, check_health


@dataclass
class EpisodeOutcome:
    seed: int
    won: bool
    score: float
    env_steps: int
    steps: int
    total_reward: float
    actions: list[str] = field(default_factory=list)
    error: str = ""  # the status of an episode the services could not finish (counted as lost, score 0)


@dataclass
class EvalReport:
    env: str
    agent: str
    fold: str
    simulations: int
    episodes: list[EpisodeOutcome]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        return sum(e.won for e in self.episodes) / max(len(self.episodes), 1)

    @property
    def mean_score(self) -> float:
        return statistics.fmean(e.score for e in self.episodes) if self.episodes else 0.0

    @property
    def mean_env_steps(self) -> float:
        return statistics.fmean(e.env_steps for e in self.episodes) if self.episodes else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env, "agent": self.agent, "fold": self.fold, "simulations": self.simulations,
            "success_rate": self.success_rate, "mean_score": self.mean_score, "mean_env_steps": self.mean_env_steps,
            "mean_steps": statistics.fmean(e.steps for e in self.episodes) if self.episodes else 0.0,
            "errors": sum(bool(e.error) for e in self.episodes),
            "episodes": [asdict(e) for e in self.episodes], "settings": self.settings,
        }


def episode_request(env: str, seed: int, fold: str, agent: str, simulations: int, max_steps: int,
                    **config: Any) -> planner_pb2.PlayEpisodeRequest:
    return planner_pb2.PlayEpisodeRequest(
        env_spec=env, seed=seed, fold=fold, max_steps=max_steps,
        config=planner_pb2.SearchConfig(agent=agent, num_simulations=simulations, seed=seed, **config),
    )


async def play(settings: Settings, request: planner_pb2.PlayEpisodeRequest,
               on_update: Callable[[planner_pb2.EpisodeUpdate], None] | None = None) -> EpisodeOutcome:
    async with channel(pick(settings.endpoint("planner")), settings.grpc) as ch:  # a planner replica per episode
        stub = planner_pb2_grpc.PlannerServiceStub(ch)
        actions: list[str] = []
        last = planner_pb2.EpisodeUpdate()
        async for update in stub.PlayEpisode(request, timeout=3600):
            if update.action:
                actions.append(update.action)
            last = update
            if on_update is not None:
                on_update(update)
    obs = last.observation
    return EpisodeOutcome(request.seed, obs.won, obs.score, last.env_steps, len(actions), last.total_reward, actions)


@asynccontextmanager
async def services(settings: Settings, say: Callable[[str], None]) -> AsyncIterator[Settings]:
    """Use the running stack, or bring the embedded one up for the duration of the command; yields the
    settings to reach it with (the running stack's replicas included)."""
    from evoskill.stack.supervisor import Stack, running_settings

    if await check_health(settings.endpoint("planner").target):
        yield running_settings(settings)
        return
    say("no stack is running: starting the embedded stack for this command")
    stack = Stack(settings)
    await stack.start()
    try:
        yield stack.settings
    finally:
        stack.stop()
