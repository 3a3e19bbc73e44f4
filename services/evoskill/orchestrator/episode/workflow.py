"""EpisodeWorkflow: one episode played by the planner, as a Temporal workflow with one activity.

The smallest unit the orchestrator schedules, and the root of an episode's trace: with the
TracingInterceptor on the starting client and on the worker, StartWorkflow -> RunWorkflow ->
StartActivity -> RunActivity -> the planner's PlayEpisode (gRPC metadata) -> sandbox steps -> the
events' consumers (NATS headers) are one trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from evoskill.clients.episodes import episode_request, play
    from evoskill.platform.config import Settings


@dataclass
class EpisodeInput:
    env_spec: str
    seed: int
    fold: str = "train"
    agent: str = "mcts"
    simulations: int = 0  # 0: the planner's default
    max_steps: int = 0  # 0: the planner's default
    rollout_depth: int = 0  # 0: the planner's default


@dataclass
class PlayedEpisode:
    episode_id: str
    won: bool
    score: float
    steps: int
    env_steps: int
    total_reward: float


def episode_activities(settings: Settings) -> list[Callable[..., Any]]:
    """The activities, bound to the worker's settings (where the planner is)."""

    @activity.defn(name="play_episode")
    async def play_episode(episode: EpisodeInput) -> PlayedEpisode:
        config = {"rollout_depth": episode.rollout_depth} if episode.rollout_depth else {}
        request = episode_request(episode.env_spec, episode.seed, episode.fold, episode.agent, episode.simulations,
                                  episode.max_steps, **config)
        ids: list[str] = []
        outcome = await play(settings, request, on_update=lambda update: ids.append(update.episode_id))
        return PlayedEpisode(ids[-1] if ids else "", outcome.won, outcome.score, outcome.steps, outcome.env_steps,
                             outcome.total_reward)

    return [play_episode]


@workflow.defn
class EpisodeWorkflow:
    @workflow.run
    async def run(self, episode: EpisodeInput) -> PlayedEpisode:
        result: PlayedEpisode = await workflow.execute_activity(
            "play_episode", episode, result_type=PlayedEpisode,
            start_to_close_timeout=timedelta(hours=1),
            # An episode that failed part-way is played again from the start (a fresh session).
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=2)),
        )
        return result


__all__ = ["EpisodeInput", "EpisodeWorkflow", "PlayedEpisode", "episode_activities"]
