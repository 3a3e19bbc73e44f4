"""The planner's client: a PlayEpisode request, and the episode played through it, read as an outcome. The CLI,
the benchmarks and the orchestrator's activities play every episode through this."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evoskill.common.v1 import common_pb2
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import Settings
from evoskill.platform.replicas import pick
from evoskill.platform.rpc import channel


@dataclass
class EpisodeOutcome:
    seed: int
    won: bool
    score: float
    env_steps: int
    steps: int
    total_reward: float
    actions: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the episode's wall time in the planner
    planner_seconds: float = 0.0  # of which the planner deciding, less its waits on the environment
    error: str = ""  # the status of an episode the services could not finish (counted as lost, score 0)
    episode_id: str = ""  # `evoskill trace --episode <id>` shows where its time went
    trace_id: str = ""  # its OpenTelemetry trace ("" = tracing off): `evoskill trace <id>`, Jaeger
    explored: dict[str, int] = field(default_factory=dict)  # exploratory steps by reason (core/exploration.py)
    walks_back: int = 0  # entries into a place (room, inventory, score) the episode had entered before
    llm: dict[str, float] = field(default_factory=dict)  # the LLM's usage (common.v1.LlmUsage's fields); {} = none


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
        explored: dict[str, int] = {}
        last = planner_pb2.EpisodeUpdate()
        async for update in stub.PlayEpisode(request, timeout=3600):
            if update.action:
                actions.append(update.action)
            if update.exploration:
                explored[update.exploration] = explored.get(update.exploration, 0) + 1
            last = update
            if on_update is not None:
                on_update(update)
    obs = last.observation
    return EpisodeOutcome(request.seed, obs.won, obs.score, last.env_steps, len(actions), last.total_reward, actions,
                          seconds=last.seconds, planner_seconds=last.planner_seconds,
                          episode_id=last.episode_id or request.episode_id, trace_id=last.trace_id,
                          explored=explored, walks_back=last.walks_back, llm=llm_usage(last.llm))


def llm_usage(usage: common_pb2.LlmUsage) -> dict[str, float]:
    """An episode's LLM usage as plain numbers, every field named; {} where it asked the LLM nothing."""
    if not usage.requests:
        return {}
    return {f.name: getattr(usage, f.name) for f in usage.DESCRIPTOR.fields}
