"""A call that is cancelled or runs past its deadline stops the work behind it (planner/episode.py): the
search ends before its next round, and an episode's session is closed, so its worker is free again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import start_service
from evoskill.sandbox.service import SandboxServicer
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from tests.integration.test_bus import isolated
from tests.integration.waiting import rpc_error, until

pytestmark = pytest.mark.integration
# Minutes of search on one state, every simulation a new path (no transpositions) and so a sandbox step.
ENDLESS = planner_pb2.SearchConfig(num_simulations=100_000, rollout_depth=3, early_stop_fraction=1.0,
                                   dirichlet_weight=0.0, transpositions=False)


@pytest.fixture
async def sandbox(settings: Settings) -> AsyncIterator[tuple[Settings, SandboxServicer]]:
    # A quota no search here reaches: what ends the work is the call's end, not the session's budget.
    settings = isolated(settings.model_copy(update={"sandbox": settings.sandbox.model_copy(
        update={"step_quota": 5_000_000})}))
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "planner")]
    servicer = running[0].parts.registrations[0][1]
    assert isinstance(servicer, SandboxServicer)
    yield settings, servicer
    for service in reversed(running):
        await service.stop()


async def steady(read: object, what: str) -> int:
    """Wait until `read()` stops changing (the same over a second), and return it."""
    last: list[int] = [-1]

    async def unchanged() -> bool:
        before = read()  # type: ignore[operator]
        await asyncio.sleep(1.0)
        now = read()  # type: ignore[operator]
        done = before == now == last[0]
        last[0] = now
        return bool(done)

    await until(unchanged, what, 30)
    return last[0]


async def test_an_expired_search_stops_spending_environment_steps(
    sandbox: tuple[Settings, SandboxServicer]
) -> None:
    settings, servicer = sandbox
    async with channel(settings.endpoint("sandbox").target) as sch, \
            channel(settings.endpoint("planner").target) as pch:
        session = await sandbox_pb2_grpc.SandboxServiceStub(sch).CreateSession(
            sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1, fold="train"))
        planner = planner_pb2_grpc.PlannerServiceStub(pch)
        err = await rpc_error(planner.Search(planner_pb2.SearchRequest(session_id=session.session_id, config=ENDLESS),
                                             timeout=2.0))
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        spent = servicer.sessions[session.session_id].steps_used
        assert spent > 0  # it did search before the deadline
        stopped = await steady(lambda: servicer.sessions[session.session_id].steps_used, "the search to stop")
        assert stopped < 100_000 and session.session_id in servicer.sessions  # it ended, not the session


async def test_a_cancelled_episode_closes_its_session(sandbox: tuple[Settings, SandboxServicer]) -> None:
    settings, servicer = sandbox
    async with channel(settings.endpoint("planner").target) as ch:
        planner = planner_pb2_grpc.PlannerServiceStub(ch)
        request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=1, fold="train", max_steps=5,
                                                 config=ENDLESS)
        call = planner.PlayEpisode(request)
        await until(lambda: any(s.steps_used for s in servicer.sessions.values()), "the episode to search")
        call.cancel()
    await until(lambda: not servicer.sessions, "the cancelled episode's session to close", 30)
    assert servicer.idle[False]  # its worker is back in the pool
