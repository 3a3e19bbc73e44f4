"""One episode end to end: planner -> sandbox -> reward over real gRPC, events over a real nats-server."""

from __future__ import annotations

import pytest

from evoskill.events.v1 import events_pb2
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from tests.integration.waiting import until

pytestmark = pytest.mark.integration


async def test_one_mcts_episode_across_services_and_bus(services: Settings, spans) -> None:  # type: ignore[no-untyped-def]
    settings = services
    spans.clear()
    watcher = Bus(settings, "watcher")
    completed: list[events_pb2.EpisodeCompleted] = []
    scored: list[events_pb2.RewardScored] = []
    stats: list[events_pb2.SearchStats] = []

    @watcher.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
    async def on_episode(event: events_pb2.EpisodeCompleted) -> None:
        completed.append(event)

    @watcher.consumer(Subjects.REWARD_SCORED, events_pb2.RewardScored)
    async def on_scored(event: events_pb2.RewardScored) -> None:
        scored.append(event)

    @watcher.consumer(Subjects.SEARCH_STATS, events_pb2.SearchStats)
    async def on_stats(event: events_pb2.SearchStats) -> None:
        stats.append(event)

    await watcher.start()
    try:
        async with channel(settings.endpoint("planner").target) as ch:
            planner = planner_pb2_grpc.PlannerServiceStub(ch)
            request = planner_pb2.PlayEpisodeRequest(
                env_spec="twx:coin", seed=1, fold="test", max_steps=25,
                config=planner_pb2.SearchConfig(num_simulations=24, rollout_depth=8, seed=1),
            )
            updates = [u async for u in planner.PlayEpisode(request, timeout=200)]
        await until(lambda: bool(completed) and len(scored) >= len(completed[0].steps)
                    and len(stats) >= len(completed[0].steps),
                    "the episode's events: completed, a scored transition and search stats per step")
    finally:
        await watcher.stop()

    assert updates[-1].finished
    (episode,) = completed
    assert episode.env_spec == "twx:coin" and episode.agent == "mcts"
    assert len(episode.steps) == len([u for u in updates if u.action])
    assert episode.initial.text and not episode.initial.valid_actions  # the state before step 0, once
    for step in episode.steps:
        target = step.target
        # Every valid action, in order, listed once (not in the observations); those search dropped as
        # no-ops (inventory, look) have no visits.
        assert not step.observation.valid_actions and "inventory" in target.actions
        assert len(target.templates) == len(target.q_values) == len(target.seen) == len(target.actions)
        visits = dict(zip(target.actions, target.visit_probs, strict=True))
        assert visits["inventory"] == 0.0
        assert dict(zip(target.actions, target.seen, strict=True))["inventory"]  # a no-op leads back
        assert abs(sum(target.visit_probs) - 1.0) < 1e-5
        assert step.action.text in target.actions
    played = [u for u in updates if u.action]
    for step, update in zip(episode.steps[1:], played, strict=False):  # a step's candidates: its state's actions
        assert list(step.target.actions) == list(update.observation.valid_actions)
    assert episode.env_steps > len(episode.steps)  # search stepped the environment too
    # After the first move, the way back is marked: θ reads the episode's memory from the targets.
    assert any(s.target.seen[list(s.target.actions).index(a)] for s in episode.steps[1:]
               for a in s.target.actions if a.startswith("move"))
    # The event path scored the same transitions with the same numbers as the synchronous path.
    by_step = {e.transition.step_index: e.total for e in scored}
    assert {s.index: s.reward for s in episode.steps} == pytest.approx(by_step)
    # Each step once: what the memory gets per step carries neither valid-action list nor history digest.
    assert all(not e.transition.before.valid_actions and not e.transition.HasField("history") for e in scored)
    assert len(stats) == len(episode.steps)

    # One episode is one trace: planner -> sandbox over gRPC -> reward through NATS headers.
    finished = spans.get_finished_spans()
    (episode_span,) = [s for s in finished if s.name == "planner.episode"]
    trace_id = episode_span.context.trace_id
    assert episode_span.attributes["evoskill.episode_id"] == episode.episode_id
    steps = [s for s in finished if s.name == "sandbox.step"]
    assert len(steps) == len(episode.steps) and all(s.context.trace_id == trace_id for s in steps)
    reward_consumers = [s for s in finished if "step.executed" in s.name and s.kind.name == "CONSUMER"]
    assert reward_consumers and all(s.context.trace_id == trace_id for s in reward_consumers)
