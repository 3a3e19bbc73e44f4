"""Tool episodes across the services: the example's MCP server and mcp-server-time (from PyPI, over stdio) are
registered by a task file, their tools are the valid actions and skills, and the planner's episodes call them
through the sandbox's workers, each step scored by the reward service. A hanging and a crashing Python tool
are stopped by the sandbox's limits, and the episode goes on to win."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoskill.common.v1.common_pb2 import FailureKind
from evoskill.events.v1 import events_pb2
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import start_service
from tests.integration.test_bus import isolated
from tests.integration.tools_fixtures import BOOKSHOP, SCIFI_GOLD, TIME, write_tasks
from tests.integration.waiting import until

pytestmark = pytest.mark.integration
STEP_TIMEOUT_S = 20.0  # the sandbox's; a tool call may take 0.4 of it (8 s), whatever the task allows


@pytest.fixture
async def tool_services(settings: Settings):  # type: ignore[no-untyped-def]
    settings = isolated(settings)
    settings = settings.model_copy(update={"sandbox": settings.sandbox.model_copy(
        update={"step_timeout_s": STEP_TIMEOUT_S})})
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "planner")]
    yield settings
    for service in reversed(running):
        await service.stop()


async def test_tool_episodes_call_mcp_servers_through_the_sandbox_and_are_scored(tool_services: Settings,
                                                                                tmp_path: Path) -> None:
    settings = tool_services
    shop = {"tools": [BOOKSHOP, TIME], "arguments": {"timezone": ["Asia/Tokyo"]}, "expected_answer": "Foundation"}
    path = write_tasks(
        tmp_path,
        {"id": "faults", "goal": "Which science-fiction book is the cheapest? Answer with its title.", **shop,
         "tools": [BOOKSHOP, TIME, "pytools:stall_py", "pytools:die_py"], "timeout_s": 600,
         "gold": ["stall_py(seconds=600)", "die_py(code=3)", "get_current_time(timezone='Asia/Tokyo')",
                  *SCIFI_GOLD, "final_answer(answer='Foundation')"]},
        {"id": "shop", "goal": "Which science-fiction book is the cheapest? Answer with its title.", **shop},
    )
    watcher = Bus(settings, "watcher")
    scored: list[events_pb2.RewardScored] = []
    completed: list[events_pb2.EpisodeCompleted] = []

    @watcher.consumer(Subjects.REWARD_SCORED, events_pb2.RewardScored)
    async def on_scored(event: events_pb2.RewardScored) -> None:
        scored.append(event)

    @watcher.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
    async def on_completed(event: events_pb2.EpisodeCompleted) -> None:
        completed.append(event)

    async def play(spec: str, **config: object) -> list[planner_pb2.EpisodeUpdate]:
        async with channel(settings.endpoint("planner").target) as ch:
            request = planner_pb2.PlayEpisodeRequest(env_spec=spec, seed=1, fold="test", max_steps=12,
                                                     config=planner_pb2.SearchConfig(**config))  # type: ignore[arg-type]
            return [u async for u in planner_pb2_grpc.PlannerServiceStub(ch).PlayEpisode(request, timeout=200)]

    await watcher.start()
    try:
        demo = await play(f"tools:{path}?task=faults", agent="demo")
        await until(lambda: len(completed) == 1 and len(scored) >= len(completed[0].steps), "the demo's events",
                    within_s=90)
        searched = await play(f"tools:{path}?task=shop", agent="mcts", num_simulations=6, rollout_depth=1,
                              max_depth=3, seed=1)
        await until(lambda: len(completed) == 2, "the searched episode's events", within_s=90)
    finally:
        await watcher.stop()

    # The demo: the stalled call stopped by the sandbox's share of its step timeout (not the task's 600 s), the
    # crashed host replaced, both external failures, and the episode went on to the right answer.
    played = [u for u in demo if u.action]
    assert [u.action for u in played][:3] == ["stall_py(seconds=600)", "die_py(code=3)",
                                               "get_current_time(timezone='Asia/Tokyo')"]
    assert played[0].observation.text.startswith("stall_py(seconds=600) failed (timeout): no answer within 8 s")
    assert "exited with code 3: dying now" in played[1].observation.text
    assert '"timezone": "Asia/Tokyo"' in played[2].observation.text and "day_of_week" in played[2].observation.text
    assert demo[-1].finished and demo[-1].observation.won and demo[-1].observation.score == 1.0
    by_step = {e.transition.step_index: e for e in scored if e.transition.episode_id == demo[-1].episode_id}
    kinds = [by_step[i].transition.failure.kind for i in range(3)]
    assert kinds == [FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT, FailureKind.FAILURE_KIND_EXTERNAL_ERROR,
                     FailureKind.FAILURE_KIND_NONE]
    assert by_step[0].external_failure and by_step[1].external_failure and not by_step[2].external_failure
    last = by_step[len(played) - 1]
    assert last.terms["final_answer_correct"] > 0 and last.completion == 1.0
    assert by_step[3].terms["tool_success"] > 0  # search_books returned something new

    # Search: the tools' calls are its candidates, their schemas its skills, and it called them in the sandbox.
    episode = next(e for e in completed if e.agent == "mcts")
    assert episode.env_spec == f"tools:{path}?task=shop" and episode.env_steps > len(episode.steps)
    first = episode.steps[0].target
    skills = dict(zip(first.actions, first.templates, strict=True))
    assert skills["search_books(genre='science fiction')"] == "search_books(genre)"
    assert skills["get_current_time(timezone='Asia/Tokyo')"] == "get_current_time(timezone)"
    assert skills["ask_clarification()"] == "ask_clarification()"
    assert all(s.action.text.endswith(")") for s in episode.steps)  # every step a call
    assert searched[-1].finished
