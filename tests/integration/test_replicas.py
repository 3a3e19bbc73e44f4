"""Two sandbox and two planner replicas (real servers, each on its own port, as `evoskill up --replicas
sandbox=2,planner=2` runs them): episodes and the shadow stage spread over them, and a session made on one
sandbox replica is reached by any planner replica, which dials the replica the session's id names.

The episodes and the shadow stage run the orchestrator's own activities (the code the TrainingWorkflow and
the ExplorationWorkflow call) in temporalio's ActivityEnvironment: what is tested is how they reach the
replicas; the workflows themselves are tested in test_training_workflow.py and test_exploration_workflow.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
import pytest
from temporalio.testing import ActivityEnvironment

from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.orchestrator.exploration.activities import ExplorationActivities
from evoskill.orchestrator.exploration.logic import ShadowTask
from evoskill.orchestrator.training.activities import TrainingActivities
from evoskill.orchestrator.training.logic import EpisodeTask
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import Settings
from evoskill.platform.replicas import owner_of
from evoskill.platform.rpc import channel
from evoskill.platform.service import RunningService, start_service
from evoskill.sandbox.service import SandboxServicer
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from evoskill.stack.supervisor import free_ports
from tests.conftest import make_settings
from tests.integration.test_bus import isolated

pytestmark = pytest.mark.integration
REPLICATED = ("sandbox", "planner")
EPISODES = 4


@dataclass
class Replicated:
    settings: Settings  # what every client reads: both replicas of each replicated service listed
    replicas: dict[str, list[RunningService]]
    stopped: list[RunningService] = field(default_factory=list)

    async def stop(self, service: str, index: int) -> None:
        running = self.replicas[service][index]
        if running not in self.stopped:
            self.stopped.append(running)
            await running.stop()

    def sandbox(self, index: int) -> SandboxServicer:
        servicer = self.replicas["sandbox"][index].parts.registrations[0][1]
        assert isinstance(servicer, SandboxServicer)
        return servicer

    def address(self, service: str, index: int) -> str:
        return self.settings.endpoint(service).replicas[index]


def replica_settings(settings: Settings, service: str, address: str) -> Settings:
    """One replica's own settings: its port (what `evoskill up` sets in each process's environment)."""
    endpoint = settings.endpoint(service)
    port = int(address.rpartition(":")[2])
    return settings.model_copy(update={f"{service}_endpoint": endpoint.model_copy(update={"port": port})})


@pytest.fixture(scope="module")
async def replicated(tmp_path_factory: pytest.TempPathFactory, nats_url: str) -> AsyncIterator[Replicated]:
    base = make_settings(tmp_path_factory.mktemp("replicas"))
    ports = iter(free_ports(len(REPLICATED) * 2))
    updates: dict[str, object] = {"nats": base.nats.model_copy(update={"url": nats_url})}
    for name in REPLICATED:  # laid out as the stack does: the first replica on the service's port
        endpoint = base.endpoint(name)
        own = [next(ports), next(ports)]
        updates[f"{name}_endpoint"] = endpoint.model_copy(
            update={"port": own[0], "replicas": [f"{endpoint.host}:{port}" for port in own]})
    settings = isolated(base.model_copy(update=updates))
    replicated = Replicated(settings, {name: [] for name in REPLICATED})
    others: list[RunningService] = []
    try:
        for address in settings.sandbox_endpoint.replicas:
            replicated.replicas["sandbox"].append(
                await start_service("sandbox", replica_settings(settings, "sandbox", address)))
        others.append(await start_service("reward", settings))
        others.append(await start_service("learner", settings))
        for address in settings.planner_endpoint.replicas:
            replicated.replicas["planner"].append(
                await start_service("planner", replica_settings(settings, "planner", address)))
        yield replicated
    finally:
        for index in range(len(replicated.replicas["planner"])):
            await replicated.stop("planner", index)
        for running in others:
            await running.stop()
        for index in range(len(replicated.replicas["sandbox"])):
            await replicated.stop("sandbox", index)


def episode(seed: int) -> EpisodeTask:
    return EpisodeTask(f"rep-{uuid.uuid4().hex[:8]}", "twx:coin", seed, "train", "mcts", simulations=4, max_steps=4)


async def test_episodes_spread_over_both_sandbox_replicas(replicated: Replicated) -> None:
    activities = TrainingActivities(replicated.settings)
    before = [replicated.sandbox(i).opened for i in range(2)]
    results = [await ActivityEnvironment().run(activities.play_episode, episode(seed)) for seed in range(EPISODES)]

    assert [r.steps for r in results] and all(r.steps >= 1 and r.env_steps > r.steps for r in results)
    opened = [replicated.sandbox(i).opened - before[i] for i in range(2)]
    # Each episode dials a planner in turn, and each new session goes to the next sandbox replica, while every
    # search and step of it reaches the replica that made it (else NOT_FOUND would have failed the episode).
    assert sum(opened) == EPISODES and min(opened) >= 1, opened


async def two_versions(settings: Settings) -> tuple[str, str]:
    """Two policy versions trained on a demonstration (the shadow stage compares two)."""
    demo = EpisodeTask(f"demo-{uuid.uuid4().hex[:8]}", "twx:coin", 0, "train", "demo", simulations=1, max_steps=50)
    assert (await ActivityEnvironment().run(TrainingActivities(settings).play_episode, demo)).won
    async with channel(settings.endpoint("learner").target, settings.grpc) as ch:
        learner = learner_pb2_grpc.LearnerServiceStub(ch)
        versions = []
        for seed in (1, 2):
            reply = await learner.Train(learner_pb2.TrainRequest(
                steps=2, batch_size=8, seed=seed, episode_ids=[demo.episode_id], wait_seconds=30), timeout=120)
            versions.append(reply.policy_version)
    return versions[0], versions[1]


async def test_the_shadow_stage_runs_across_replicas(replicated: Replicated) -> None:
    baseline, candidate = await two_versions(replicated.settings)
    activities = ExplorationActivities(replicated.settings)
    before = [replicated.sandbox(i).opened for i in range(2)]
    for seed in range(2):
        task = ShadowTask(f"shadow-{uuid.uuid4().hex[:8]}", "twx:coin", seed, "dev", baseline, candidate,
                          simulations=4, max_steps=3)
        shadow = await ActivityEnvironment().run(activities.shadow_episode, task)
        # At every step the planner playing it searched with both versions and the baseline acted.
        assert shadow.steps and all(step.valid and step.baseline_action for step in shadow.steps)
    assert [replicated.sandbox(i).opened - before[i] for i in range(2)] == [1, 1]


async def test_a_session_made_on_one_replica_is_searched_by_either_planner(replicated: Replicated) -> None:
    owner, other = replicated.address("sandbox", 0), replicated.address("sandbox", 1)
    async with channel(owner) as owner_ch, channel(other) as other_ch:
        sandbox = sandbox_pb2_grpc.SandboxServiceStub(owner_ch)
        session = await sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=5),
                                              timeout=120)
        assert owner_of(session.session_id) == owner
        try:
            config = planner_pb2.SearchConfig(agent="mcts", num_simulations=8, seed=7)
            actions = []
            for index in range(2):
                async with channel(replicated.address("planner", index)) as planner_ch:
                    reply = await planner_pb2_grpc.PlannerServiceStub(planner_ch).Search(
                        planner_pb2.SearchRequest(session_id=session.session_id, config=config))
                actions.append(reply.action)
            assert actions[0] in session.observation.valid_actions
            assert actions[0] == actions[1]  # the same session, seed and settings: the same choice on either planner

            # The other sandbox replica does not hold it and says who does.
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await sandbox_pb2_grpc.SandboxServiceStub(other_ch).Step(
                    sandbox_pb2.StepRequest(session_id=session.session_id, action=actions[0]))
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
            assert f"held by sandbox replica {owner}" in (info.value.details() or "")
            step = await sandbox.Step(sandbox_pb2.StepRequest(session_id=session.session_id, action=actions[0]))
            assert step.transition.action.text == actions[0]
        finally:
            await sandbox.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=session.session_id))


async def search_status(replicated: Replicated, session_id: str) -> tuple[grpc.StatusCode, str]:
    async with channel(replicated.address("planner", 1)) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await planner_pb2_grpc.PlannerServiceStub(ch).Search(planner_pb2.SearchRequest(
                session_id=session_id, config=planner_pb2.SearchConfig(agent="mcts", num_simulations=4)))
    return info.value.code(), info.value.details() or ""


async def test_a_session_on_an_unknown_or_stopped_replica_is_named(replicated: Replicated) -> None:
    code, details = await search_status(replicated, "127.0.0.1:1/s1-0000")
    assert code == grpc.StatusCode.NOT_FOUND and "replica 127.0.0.1:1, which is not one of the sandbox" in details

    stopped = replicated.address("sandbox", 1)
    async with channel(stopped) as ch:
        session = await sandbox_pb2_grpc.SandboxServiceStub(ch).CreateSession(
            sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=6), timeout=120)
    await replicated.stop("sandbox", 1)  # the module's last test
    code, details = await search_status(replicated, session.session_id)
    assert code == grpc.StatusCode.UNAVAILABLE, details
    assert f"sandbox replica {stopped}, which holds session {session.session_id}, is unavailable" in details
