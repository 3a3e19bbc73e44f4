"""ExplorationWorkflow on a real Temporal dev server and nats-server, with the real services in-process.

Two policy versions come from a tiny TrainingWorkflow; each test first makes the older one serve, then
explores the newer one. The decision rules themselves are unit-tested (tests/unit/test_exploration_logic.py);
here thresholds are set so the outcome is known in advance (accept anything, or demand the impossible), and
what is checked is the wiring: the stages run, the learner's serving pointer moves (or stays), and the planner
serves that version for an empty policy_version without a restart. Every branch of the workflow (shadow
refusal, abort in a stage) is tested against test doubles on the time-skipping server:
tests/orchestrator/test_exploration_workflow.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import ActivityEnvironment

from evoskill.core.agent import Decision, Step
from evoskill.events.v1 import events_pb2
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.orchestrator.exploration.activities import ExplorationActivities
from evoskill.orchestrator.exploration.logic import (
    ExplorationInput,
    ExplorationParams,
    ExplorationResult,
    ShadowTask,
    Thresholds,
)
from evoskill.orchestrator.exploration.workflow import ExplorationWorkflow
from evoskill.orchestrator.training.starter import start_training
from evoskill.planner.agents import SearchAgent
from evoskill.planner.service import PlannerServicer
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.rpc import channel
from tests.integration.training_stack import Stack, client_of, tiny

pytestmark = pytest.mark.integration

# Thresholds any figures pass, and ones no candidate can meet (it would have to beat the baseline's mean
# reward by a million).
ACCEPT_ALL = {"min_agreement": 0.0, "max_invalid": 0, "success_margin": 1.0, "reward_margin": 1e6, "alpha": 0.5}
IMPOSSIBLE_REWARD = -1e6


class Served:
    """The policy version of every episode the planner completed (episode.completed)."""

    def __init__(self, stack: Stack) -> None:
        self.versions: dict[str, str] = {}
        self.bus = Bus(stack.settings, f"explore-test-{uuid.uuid4().hex[:6]}")

        @self.bus.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
        async def on_episode(event: events_pb2.EpisodeCompleted) -> None:
            self.versions[event.episode_id] = event.policy_version

    async def of(self, episode_ids: list[str], within_s: float = 10.0) -> list[str]:
        for _ in range(int(within_s / 0.1)):
            if all(e in self.versions for e in episode_ids):
                break
            await asyncio.sleep(0.1)
        return [self.versions.get(e, "") for e in episode_ids]


@pytest.fixture(scope="module")
async def versions(running: Stack) -> tuple[str, str]:
    """Two trained policy versions (older, newer) from a two-epoch TrainingWorkflow."""
    client = await client_of(running.settings)
    handle = await start_training(client, running.settings, tiny(epochs=2, eval_episodes=0),
                                  f"train-{uuid.uuid4().hex[:8]}")
    result = await handle.result()
    older, newer = (epoch.policy_version for epoch in result.history)
    assert older and newer and older != newer
    return older, newer


@pytest.fixture(scope="module")
async def served(running: Stack) -> AsyncIterator[Served]:
    watcher = Served(running)
    await watcher.bus.start()
    yield watcher
    await watcher.bus.stop()


async def learner_call(stack: Stack, method: str, request: object) -> object:
    async with channel(stack.settings.endpoint("learner").target, stack.settings.grpc) as ch:
        return await getattr(learner_pb2_grpc.LearnerServiceStub(ch), method)(request)


async def serving(stack: Stack) -> learner_pb2.ListPoliciesReply:
    reply = await learner_call(stack, "ListPolicies", learner_pb2.ListPoliciesRequest())
    assert isinstance(reply, learner_pb2.ListPoliciesReply)
    return reply


async def planner_serves(stack: Stack, version: str, within_s: float = 10.0) -> str:
    """What the planner resolves an empty policy_version to, once it equals `version` (or the deadline)."""
    planner = next(s.parts.registrations[0][1] for s in stack.services
                   if isinstance(s.parts.registrations[0][1], PlannerServicer))
    served = ""
    for _ in range(int(within_s / 0.1)):
        served = (await asyncio.to_thread(planner.policies.get, "")).version
        if served == version:
            break
        await asyncio.sleep(0.1)
    return served


async def make_serving(stack: Stack, version: str) -> None:
    await learner_call(stack, "SetServing", learner_pb2.SetServingRequest(version=version, reason="test setup"))
    assert await planner_serves(stack, version) == version


def params(candidate: str, thresholds: dict[str, float] | None = None, **overrides: object) -> ExplorationParams:
    """Tiny episodes (twx:coin, 4 steps, 4 simulations), no shadow or watch unless asked; ACCEPT_ALL thresholds
    with `thresholds` overriding."""
    fields: dict[str, object] = {"envs": ["twx:coin"], "shadow_episodes": 0, "canary_episodes": 2,
                                 "watch_episodes": 0, "simulations": 4, "max_steps": 4, "heartbeat_timeout_s": 20.0}
    fields.update(overrides)
    return ExplorationParams(candidate=candidate, thresholds=Thresholds(**{**ACCEPT_ALL, **(thresholds or {})}),  # type: ignore[arg-type]
                             **fields)  # type: ignore[arg-type]


async def explore(stack: Stack, p: ExplorationParams) -> ExplorationResult:
    client = await client_of(stack.settings)
    return await client.execute_workflow(ExplorationWorkflow.run, ExplorationInput(p),
                                         id=f"explore-{uuid.uuid4().hex[:8]}",
                                         task_queue=stack.settings.temporal.task_queue)


async def test_candidate_within_the_margins_passes_shadow_and_canary_and_then_serves(
        stack: Stack, versions: tuple[str, str], served: Served) -> None:
    older, newer = versions
    await make_serving(stack, older)
    result = await explore(stack, params(newer, shadow_episodes=1, watch_episodes=1))

    assert result.outcome == "promoted" and result.baseline == older and result.serving == newer
    # Shadow: the baseline acted, the candidate's choice and value were recorded at every step.
    assert result.shadow is not None and result.shadow.episodes == 1 and result.shadow.steps >= 1
    assert result.shadow.invalid == 0 and result.decisions[0].startswith("shadow:")
    # Canary: one episode each (fraction 0.5 of 2), played with the version of its arm.
    assert result.canary_candidate is not None and result.canary_baseline is not None
    assert result.canary_candidate.episodes == 1 and result.canary_baseline.episodes == 1
    canary_ids = [f"{result.workflow_id}-e0001-c{i:03d}" for i in range(2)]
    assert sorted(await served.of(canary_ids)) == sorted([older, newer])
    # The learner's registry says the candidate serves, and why.
    listed = await serving(stack)
    assert listed.serving_version == newer and "canary" in listed.serving_reason
    assert [p.version for p in listed.policies if p.serving] == [newer]
    # The planner followed without a restart: the watch episode asked for "" and got the candidate.
    assert await planner_serves(stack, newer) == newer
    assert await served.of([f"{result.workflow_id}-e0002-w000"]) == [newer]
    assert result.watch is not None and result.watch.episodes == 1


async def test_candidate_failing_its_canary_thresholds_is_rolled_back(
        stack: Stack, versions: tuple[str, str]) -> None:
    older, newer = versions
    await make_serving(stack, older)
    result = await explore(stack, params(newer, thresholds={"reward_margin": IMPOSSIBLE_REWARD}))

    assert result.outcome == "rolled_back" and "regressed on mean_reward" in result.reason
    assert result.serving == older and result.watch is None
    listed = await serving(stack)
    assert listed.serving_version == older and listed.serving_reason == "test setup"  # never moved
    assert await planner_serves(stack, older) == older


async def test_regression_in_the_watch_window_rolls_back_by_itself(stack: Stack, versions: tuple[str, str]) -> None:
    older, newer = versions
    await make_serving(stack, older)
    result = await explore(stack, params(newer, watch_episodes=1,
                                         thresholds={"watch_reward_margin": IMPOSSIBLE_REWARD}))

    assert result.outcome == "rolled_back" and result.reason.startswith("watch:")
    assert [d.split(":")[0] for d in result.decisions] == ["canary", "watch"]
    listed = await serving(stack)
    assert listed.serving_version == older and listed.serving_reason.startswith("rolled back by exploration")
    assert await planner_serves(stack, older) == older


async def test_the_shadow_candidate_decides_on_the_episodes_own_state_and_memory(
        stack: Stack, versions: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The shadow stage's episode is played by the planner's runner: at each real step the candidate searches
    with the memory the serving baseline searches with (what the episode took, the states it was in)."""
    older, newer = versions
    memory_seen: dict[str, list[tuple[int, list[str], int]]] = {older: [], newer: []}
    act = SearchAgent.act

    def spy(agent: SearchAgent, step: Step) -> Decision:  # in the planner's thread: the real search runs
        version = getattr(agent.policy, "version", "")
        memory_seen.setdefault(version, []).append((step.index, list(step.memory.taken),
                                                    sum(step.memory.visited.values())))
        return act(agent, step)

    monkeypatch.setattr(SearchAgent, "act", spy)
    task = ShadowTask(f"shadow-{uuid.uuid4().hex[:8]}", "twx:coin", 3, "dev", older, newer, simulations=4,
                      max_steps=4)
    shadow = await ActivityEnvironment().run(ExplorationActivities(stack.settings).shadow_episode, task)

    taken = [s.baseline_action for s in shadow.steps]
    assert len(taken) >= 2 and all(s.valid and s.candidate_action for s in shadow.steps)
    expected = [(i, taken[:i], i) for i in range(len(taken))]
    assert memory_seen[older] == expected and memory_seen[newer] == expected
