"""The learner service and policy serving against a real nats-server, real gRPC and real TextWorldExpress:
episodes in over the bus (evaluation folds skipped), Train -> a published version (once per request id),
a restart that keeps replay, θ and the request ids, and a planner that hot-swaps to the new θ and plays
policy+mcts with it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from evoskill.common.v1.common_pb2 import Action, Transition
from evoskill.core.episode_record import record_step
from evoskill.core.learn import OnnxPolicy
from evoskill.envs import make_env
from evoskill.events.v1 import events_pb2
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.planner.policy import PolicyStore
from evoskill.planner.service import PlannerServicer
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import LearnerSettings, Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import start_service
from tests.integration.test_bus import isolated
from tests.integration.waiting import rpc_error, until
from tests.unit.test_episode_record import played

pytestmark = pytest.mark.integration

# A bound on each call, well inside pytest's timeout: a call that hangs fails as itself, and the stack's
# teardown still runs (pytest's timeout skips it and leaves the services to later tests).
CALL_S = 120
LOSSES = {"loss", "distill", "value", "pg", "entropy", "contrastive", "grad_norm"}


def gold_episode(env_spec: str, seed: int, episode_id: str, max_steps: int) -> events_pb2.EpisodeCompleted:
    """The environment's gold path as a searched episode: real observations, actions and templates, the
    visits on the gold action (what a good search would have found)."""
    env = make_env(env_spec)
    try:
        obs = env.reset(seed, "train")
        episode = events_pb2.EpisodeCompleted(episode_id=episode_id, env_spec=env_spec, seed=seed, fold="train",
                                              agent="mcts")
        for index, action in enumerate((env.gold_path() or [])[:max_steps]):
            actions = list(obs.valid_actions)
            visits = [0.5 / len(actions)] * len(actions)
            visits[actions.index(action)] += 0.5
            after, reward = env.step(action)
            transition = Transition(episode_id=episode_id, step_index=index, env_spec=env_spec, before=obs,
                                    action=Action(text=action, template=env.template(action)), after=after,
                                    env_reward=reward)
            target = events_pb2.SearchTarget(actions=actions, visit_probs=visits,
                                             q_values=[2 * v for v in visits], priors=[1 / len(actions)] * len(actions),
                                             root_value=0.3, templates=[env.template(a) for a in actions])
            record_step(episode, transition, target, reward)
            episode.total_reward += reward
            obs = after
        episode.score, episode.won, episode.env_steps = obs.score, obs.won, len(episode.steps)
        return episode
    finally:
        env.close()


@pytest.fixture(scope="module")
def episodes() -> list[events_pb2.EpisodeCompleted]:
    won = gold_episode("twx:coin", 1, "gold-1", max_steps=100)
    cut = gold_episode("twx:coin", 2, "gold-2", max_steps=6)
    assert won.won and not cut.won
    return [won, cut]


@pytest.fixture
def learner_settings(settings: Settings) -> Settings:
    small = LearnerSettings(hidden=32, feature_dim=64, batch_size=8)
    return isolated(settings).model_copy(update={"learner": small})


class Watcher:
    """A bus client that publishes test events and records what services announce."""

    def __init__(self, settings: Settings) -> None:
        self.bus = Bus(settings, "watcher")
        self.published: list[events_pb2.PolicyPublished] = []
        self.letters: list[events_pb2.DeadLetter] = []
        self.episodes: dict[str, events_pb2.EpisodeCompleted] = {}
        self.bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished)(self._append(self.published))
        self.bus.consumer(f"{Subjects.DLQ}.{Subjects.EPISODE_COMPLETED}",
                          events_pb2.DeadLetter)(self._append(self.letters))

        @self.bus.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
        async def on_episode(event: events_pb2.EpisodeCompleted) -> None:
            self.episodes[event.episode_id] = event

    def letters_of(self, service: str) -> list[events_pb2.DeadLetter]:
        return [letter for letter in self.letters if letter.consumer.startswith(f"{service}-")]

    @staticmethod
    def _append(into: list) -> Callable:  # type: ignore[type-arg]
        async def handle(event: object) -> None:
            into.append(event)

        return handle


async def test_learner_trains_publishes_and_survives_a_restart(
    learner_settings: Settings, episodes: list[events_pb2.EpisodeCompleted], tmp_path: Path
) -> None:
    settings = learner_settings
    ids = [e.episode_id for e in episodes]
    watcher = Watcher(settings)
    await watcher.bus.start()
    learner = await start_service("learner", settings)
    try:
        async with channel(settings.endpoint("learner").target) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            err = await rpc_error(stub.Train(learner_pb2.TrainRequest(steps=2)))
            assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "replay is empty" in (err.details() or "")
            err = await rpc_error(stub.GetPolicy(learner_pb2.GetPolicyRequest()))
            assert err.code() == grpc.StatusCode.NOT_FOUND and "no policy has been published" in (err.details() or "")
            err = await rpc_error(stub.Train(learner_pb2.TrainRequest(steps=0)))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "steps must be in [1, 1000000]" in (
                err.details() or "")
            err = await rpc_error(stub.Train(learner_pb2.TrainRequest(steps=1, online_fraction=1.5)))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "online_fraction" in (err.details() or "")

            for episode in [*episodes, episodes[0]]:  # the last one is a redelivery
                await watcher.bus.publish(Subjects.EPISODE_COMPLETED, episode)
            await watcher.bus.broker.publish(b"\xff\xff\xff", watcher.bus.subject(Subjects.EPISODE_COMPLETED),
                                             stream=watcher.bus.stream.name)
            await watcher.bus.publish(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted(env_spec="twx:coin"))
            await until(lambda: len(watcher.letters_of("learner")) == 2, "the learner's two dead letters")
            reasons = sorted(letter.error for letter in watcher.letters_of("learner"))
            assert "cannot decode EpisodeCompleted" in reasons[0] and "episode_id is empty" in reasons[1]

            # An evaluation's episode is acknowledged, not stored; a Train naming it says why, without waiting.
            evaluation = events_pb2.EpisodeCompleted()
            evaluation.CopyFrom(episodes[0])
            evaluation.episode_id, evaluation.fold = "eval-1", "test"
            await watcher.bus.publish(Subjects.EPISODE_COMPLETED, evaluation)
            err = await rpc_error(stub.Train(learner_pb2.TrainRequest(steps=1, episode_ids=[*ids, "eval-1"],
                                                                      wait_seconds=30)))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "episode eval-1 is from the 'test' fold" in (err.details() or "")
            assert "learner.train_folds: train" in (err.details() or "")
            assert len(watcher.letters_of("learner")) == 2  # skipped, not dead-lettered

            request = learner_pb2.TrainRequest(steps=3, episode_ids=ids, wait_seconds=30, seed=7,
                                               request_id="run-e0-train")
            reply = await stub.Train(request)
            assert reply.policy_version == "v000001" and reply.steps == 3 and reply.samples == 24
            assert reply.replay_episodes == 2  # the redelivered episode is stored once
            assert reply.replay_size == sum(len(e.steps) for e in episodes)
            assert set(reply.losses) >= LOSSES and all(math.isfinite(v) for v in reply.losses.values())
            await until(lambda: [p.version for p in watcher.published] == ["v000001"], "policy.published v000001")
            # The same request again (a retried activity): the same reply, no second version.
            assert await stub.Train(request) == reply
            first = reply

            listed = (await stub.ListPolicies(learner_pb2.ListPoliciesRequest())).policies
            assert [p.version for p in listed] == ["v000001"] and not listed[0].onnx_model
            assert listed[0].metrics["replay_episodes"] == 2 and listed[0].created_unix_ms > 0
            info = await stub.GetPolicy(learner_pb2.GetPolicyRequest(version="1"))
            assert info.version == "v000001"
            onnx = tmp_path / "fetched.onnx"  # the bytes are the policy: no path on the learner's disk involved
            await asyncio.to_thread(onnx.write_bytes, info.onnx_model)
            assert OnnxPolicy(onnx).version == 1
            err = await rpc_error(stub.GetPolicy(learner_pb2.GetPolicyRequest(version="v000009")))
            assert err.code() == grpc.StatusCode.NOT_FOUND
            err = await rpc_error(stub.GetPolicy(learner_pb2.GetPolicyRequest(version="newest")))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            err = await rpc_error(stub.Train(learner_pb2.TrainRequest(steps=1, episode_ids=["never-played"],
                                                                      wait_seconds=0.2)))
            assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "never-played" in (err.details() or "")
    finally:
        await learner.stop()

    learner = await start_service("learner", settings)  # same state folder: replay, θ and registry survive
    try:
        await watcher.bus.publish(Subjects.EPISODE_COMPLETED, episodes[1])  # seen before the restart
        async with channel(settings.endpoint("learner").target) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            again = await stub.Train(learner_pb2.TrainRequest(steps=3, request_id="run-e0-train"))
            assert again == first  # the request id outlived the restart
            # A retry arriving while the first call still trains waits for it and gets its version.
            next_epoch = learner_pb2.TrainRequest(steps=2, episode_ids=ids, request_id="run-e1-train")
            reply, retried = await asyncio.gather(stub.Train(next_epoch), stub.Train(next_epoch))
            assert reply.policy_version == "v000002" and reply.replay_episodes == 2 and retried == reply
            # A caller that gives up on a million updates does not hold the learner: it stops, θ is put back,
            # nothing is published, and the next Train (which would otherwise wait hours) gets the next version.
            err = await rpc_error(stub.Train(learner_pb2.TrainRequest(steps=1_000_000, request_id="gone"),
                                             timeout=1.0))
            assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            after = await stub.Train(learner_pb2.TrainRequest(steps=1), timeout=120)
            assert after.policy_version == "v000003"
            listed = (await stub.ListPolicies(learner_pb2.ListPoliciesRequest())).policies
        assert [p.version for p in listed] == ["v000001", "v000002", "v000003"]
        assert listed[1].metrics["total_steps"] == 5  # θ continued from the checkpoint: 3 + 2 updates
        # the abandoned updates were undone: v000003 is v000002's θ plus one update
        assert listed[2].metrics["total_steps"] == 6 and "gone" not in str(listed[2].metrics)
        await until(lambda: len(watcher.published) == 3, "policy.published v000003")
    finally:
        await learner.stop()
        await watcher.bus.stop()


async def test_an_episode_of_any_size_reaches_the_learner_and_wakes_a_waiting_train(
    learner_settings: Settings
) -> None:
    """A ScienceWorld-sized episode, several times NATS's max_payload, published while a Train that needs it is
    already waiting: it travels through the object store, every step lands in replay, and Train goes on."""
    settings = learner_settings
    episode, _ = played(60, width=800, episode_id="long-1")
    watcher = Watcher(settings)
    await watcher.bus.start()
    max_payload = watcher.bus.broker.config.connection_state.connection.max_payload  # type: ignore[attr-defined]
    assert episode.ByteSize() > 2 * max_payload
    learner = await start_service("learner", settings)
    try:
        async with channel(settings.endpoint("learner").target) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            train = asyncio.ensure_future(stub.Train(learner_pb2.TrainRequest(steps=1, episode_ids=["long-1"],
                                                                              wait_seconds=120)))
            await watcher.bus.publish(Subjects.EPISODE_COMPLETED, episode)
            reply = await train
        assert reply.policy_version == "v000001" and reply.replay_episodes == 1 and reply.replay_size == 60
        await until(lambda: "long-1" in watcher.episodes, "the long episode at a second consumer")
        assert watcher.episodes["long-1"] == episode
        assert not watcher.letters_of("learner")
    finally:
        await learner.stop()
        await watcher.bus.stop()


async def play(stub: planner_pb2_grpc.PlannerServiceStub, episode_id: str, agent: str,
               version: str = "") -> list[planner_pb2.EpisodeUpdate]:
    config = planner_pb2.SearchConfig(num_simulations=8, rollout_depth=3, seed=1, agent=agent, policy_version=version,
                                      dirichlet_weight=0.0, value_mix=0.5)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=1, fold="train", max_steps=3, config=config,
                                             episode_id=episode_id)
    return [u async for u in stub.PlayEpisode(request, timeout=CALL_S)]


@dataclass
class Stack:
    """Sandbox, reward, learner and planner running, with a watcher on the bus and stubs to call them."""

    watcher: Watcher
    planner: planner_pb2_grpc.PlannerServiceStub
    learner: learner_pb2_grpc.LearnerServiceStub
    policies: PolicyStore  # the planner's


@asynccontextmanager
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    watcher = Watcher(settings)
    await watcher.bus.start()
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "learner", "planner")]
    planner_servicer = running[-1].parts.registrations[0][1]
    assert isinstance(planner_servicer, PlannerServicer)
    try:
        async with channel(settings.endpoint("planner").target) as pch, \
                channel(settings.endpoint("learner").target) as lch:
            yield Stack(watcher, planner_pb2_grpc.PlannerServiceStub(pch), learner_pb2_grpc.LearnerServiceStub(lch),
                        planner_servicer.policies)
    finally:
        for service in reversed(running):
            await service.stop()
        await watcher.bus.stop()


async def test_planner_hot_swaps_to_a_published_policy_and_plays_policy_mcts(learner_settings: Settings) -> None:
    async with stack(learner_settings) as running:
        watcher, planner, learner = running.watcher, running.planner, running.learner
        err = await rpc_error(play(planner, "too-early", "policy+mcts"))
        assert err.code() == grpc.StatusCode.NOT_FOUND and "no policy has been published" in (err.details() or "")

        await play(planner, "mcts-1", "mcts")  # the planner's episode reaches replay over the bus
        reply = await learner.Train(learner_pb2.TrainRequest(steps=2, episode_ids=["mcts-1"], wait_seconds=30),
                                    timeout=CALL_S)
        assert reply.policy_version == "v000001"
        await until(lambda: running.policies.latest == "v000001", "the planner to load v000001")

        updates = await play(planner, "theta-1", "policy+mcts")
        priors = [s.prior for s in updates[0].search.root]
        assert max(priors) - min(priors) > 1e-4  # θ's priors, not uniform (root noise is off)
        await until(lambda: "theta-1" in watcher.episodes, "EpisodeCompleted theta-1")
        assert watcher.episodes["theta-1"].policy_version == "v000001"
        assert watcher.episodes["theta-1"].agent == "policy+mcts"

        reply = await learner.Train(learner_pb2.TrainRequest(steps=2, episode_ids=["theta-1"], wait_seconds=30),
                                    timeout=CALL_S)
        assert reply.policy_version == "v000002"
        await until(lambda: running.policies.latest == "v000002", "the planner to hot-swap to v000002")
        await play(planner, "theta-2", "policy+mcts")
        await play(planner, "pinned-1", "policy", version="v000001")
        await until(lambda: {"theta-2", "pinned-1"} <= set(watcher.episodes), "the last two episodes")
        assert watcher.episodes["theta-2"].policy_version == "v000002"
        assert watcher.episodes["pinned-1"].policy_version == "v000001"
        assert watcher.episodes["mcts-1"].policy_version == ""
        err = await rpc_error(play(planner, "unknown", "policy", version="v000099"))
        assert err.code() == grpc.StatusCode.NOT_FOUND


async def test_a_reader_policy_is_trained_published_and_played(learner_settings: Settings) -> None:
    """learner.encoder = reader end to end: the learner trains and exports the reading encoder, and the
    planner builds the token inputs the file's metadata names, for θ alone and for search."""
    reader = learner_settings.learner.model_copy(update={"encoder": "reader", "reader_width": 16})
    async with stack(learner_settings.model_copy(update={"learner": reader})) as running:
        planner, learner = running.planner, running.learner
        await play(planner, "demo-1", "demo")
        reply = await learner.Train(learner_pb2.TrainRequest(steps=2, episode_ids=["demo-1"], wait_seconds=30),
                                    timeout=CALL_S)
        assert reply.policy_version == "v000001"
        await until(lambda: running.policies.latest == "v000001", "the planner to load v000001")
        served = running.policies.get("v000001").policy
        assert served.net_config["encoder"] == "reader" and served.featurizer_spec["kind"] == "tokens"
        alone = await play(planner, "alone-1", "policy")
        searched = await play(planner, "searched-1", "policy+mcts")
        assert alone[-1].finished and searched[-1].finished
        priors = [s.prior for s in searched[0].search.root]
        assert max(priors) - min(priors) > 1e-4  # the reader's priors, not uniform
        episodes = running.watcher.episodes
        await until(lambda: {"alone-1", "searched-1"} <= set(episodes), "both episodes")
        assert {episodes[e].policy_version for e in ("alone-1", "searched-1")} == {"v000001"}
