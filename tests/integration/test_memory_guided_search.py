"""Memories guide the search: the second episode of a game retrieves the first one's steps, and they tilt
the root priors (search.memory_weight > 0), across real gRPC, NATS and Qdrant local mode."""

from __future__ import annotations

import pytest

from evoskill.memory.v1 import memory_pb2, memory_pb2_grpc
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import start_service
from tests.integration.test_bus import isolated
from tests.integration.waiting import until

pytestmark = pytest.mark.integration


@pytest.fixture
async def guided(settings: Settings):  # type: ignore[no-untyped-def]
    settings = isolated(settings)
    settings = settings.model_copy(update={
        "memory": settings.memory.model_copy(update={"featurizer": "hash"}),
        "search": settings.search.model_copy(update={"memory_weight": 2.0, "memory_limit": 8}),
    })
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "memory", "planner")]
    yield settings
    for service in reversed(running):
        await service.stop()


def uniform(update: planner_pb2.EpisodeUpdate) -> bool:
    priors = [s.prior for s in update.search.root]
    return max(priors) - min(priors) < 1e-6


async def test_second_episode_is_guided_by_the_first(guided: Settings) -> None:
    request = planner_pb2.PlayEpisodeRequest(
        env_spec="twx:coin", seed=1, fold="train", max_steps=6,
        config=planner_pb2.SearchConfig(num_simulations=8, rollout_depth=4, dirichlet_weight=0.0, seed=1),
    )
    async with channel(guided.endpoint("planner").target) as ch, \
            channel(guided.endpoint("memory").target) as mch:
        planner, memory = planner_pb2_grpc.PlannerServiceStub(ch), memory_pb2_grpc.MemoryServiceStub(mch)
        first = [u async for u in planner.PlayEpisode(request, timeout=120) if u.action]
        assert uniform(first[0])  # nothing remembered yet: no noise, no θ, so uniform priors

        async def remembered_at_least(n: int) -> bool:  # the memory stores steps as reward.scored arrives
            reply = await memory.Retrieve(memory_pb2.RetrieveRequest(
                goal=first[0].observation.goal, state="kitchen", limit=50, env_spec="twx:coin"))
            return len(reply.results) >= n

        await until(lambda: remembered_at_least(len(first)), "the first episode's steps in memory")
        request.episode_id = "second"
        second = [u async for u in planner.PlayEpisode(request, timeout=120) if u.action]
    assert not uniform(second[0])  # the same start state, now with the first episode's steps as advice
