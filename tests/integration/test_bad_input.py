"""Bad input at every edge of a real stack (sandbox, reward, memory, planner, learner on a real nats-server):
a poisoned episode never reaches θ, an unfit policy is never served, an oversized message on any consumed
subject is dead-lettered once and the consumer goes on, and random requests and events (hypothesis) never
get INTERNAL or UNKNOWN, never make a consumer retry a bug, and never leave a non-finite number stored."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import onnx
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

from evoskill.common.v1 import common_pb2
from evoskill.core.learn.export import policy_file_name
from evoskill.events.v1 import events_pb2
from evoskill.learner.registry import PolicyRegistry
from evoskill.learner.servicer import LearnerServicer
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.memory.service import MemoryServicer
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.service import PlannerServicer, policy_consumer
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import LearnerSettings, Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import RunningService, start_service
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from tests.conftest import make_settings
from tests.integration.test_bus import isolated
from tests.integration.test_learner_service import gold_episode, play
from tests.integration.waiting import rpc_error, until
from tests.messages import messages, perturbed
from tests.unit.test_limits import numbers

pytestmark = pytest.mark.integration

SERVICES = ("sandbox", "reward", "memory", "learner", "planner")
PROTOS: dict[str, ServiceDescriptor] = {
    "sandbox": sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"],
    "reward": reward_pb2.DESCRIPTOR.services_by_name["RewardService"],
    "memory": memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
    "planner": planner_pb2.DESCRIPTOR.services_by_name["PlannerService"],
    "learner": learner_pb2.DESCRIPTOR.services_by_name["LearnerService"],
}
NEVER = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)


@dataclass
class Edges:
    settings: Settings
    running: dict[str, RunningService]
    watcher: Bus
    letters: list[events_pb2.DeadLetter] = field(default_factory=list)

    def servicer(self, name: str) -> Any:
        return self.running[name].parts.registrations[0][1]

    @property
    def learner(self) -> LearnerServicer:
        return self.servicer("learner")  # type: ignore[no-any-return]

    @property
    def planner(self) -> PlannerServicer:
        return self.servicer("planner")  # type: ignore[no-any-return]

    def durables(self) -> dict[str, str]:
        """Every durable consumer of the services, by the subject it consumes."""
        published = policy_consumer(self.settings)
        return {"reward-step-executed": Subjects.STEP_EXECUTED, "memory-reward-scored": Subjects.REWARD_SCORED,
                "memory-episode-completed": Subjects.EPISODE_COMPLETED,
                "learner-episode-completed": Subjects.EPISODE_COMPLETED,
                published: Subjects.POLICY_PUBLISHED,
                published.replace("published", "serving"): Subjects.POLICY_SERVING}

    async def settled(self) -> None:
        """Wait until every consumer has resolved (acked or dead-lettered) everything published so far, and the
        watcher has every dead letter."""
        js = self.watcher.broker.config.connection_state.stream  # type: ignore[attr-defined]

        async def done() -> bool:
            for durable in [*self.durables(), "watcher-dlq"]:  # the letters are published before their message ends
                info = await js.consumer_info(self.settings.nats.stream, durable)
                if info.num_pending or info.num_ack_pending:  # not delivered yet, or delivered and not resolved
                    return False
            return True

        await until(done, "every consumer to resolve what was published", 120)

    def letters_of(self, consumer: str) -> list[events_pb2.DeadLetter]:
        return [letter for letter in self.letters if letter.consumer == consumer]


@pytest.fixture(scope="module")
async def edges(tmp_path_factory: pytest.TempPathFactory, nats_url: str) -> AsyncIterator[Edges]:
    """The five services, and θ v000001 trained on a gold episode and loaded by the planner."""
    base = make_settings(tmp_path_factory.mktemp("edges"))
    settings = isolated(base.model_copy(update={
        "nats": base.nats.model_copy(update={"url": nats_url}),
        "learner": LearnerSettings(hidden=32, feature_dim=64, batch_size=8),
        "memory": base.memory.model_copy(update={"featurizer": "hash"}),
        "sandbox": base.sandbox.model_copy(update={"max_sessions": 4}),  # random sessions reuse a few workers
    }))
    watcher = Bus(settings, "watcher")
    edges = Edges(settings, {}, watcher)

    @watcher.consumer(f"{Subjects.DLQ}.>", events_pb2.DeadLetter, durable="watcher-dlq")
    async def on_letter(letter: events_pb2.DeadLetter) -> None:
        edges.letters.append(letter)

    await watcher.start()
    try:
        for name in SERVICES:
            edges.running[name] = await start_service(name, settings)
        await watcher.publish(Subjects.EPISODE_COMPLETED, gold_episode("twx:coin", 1, "gold-1", max_steps=8))
        async with channel(settings.endpoint("learner").target) as ch:
            reply = await learner_pb2_grpc.LearnerServiceStub(ch).Train(
                learner_pb2.TrainRequest(steps=2, episode_ids=["gold-1"], wait_seconds=30))
        assert reply.policy_version == "v000001"
        await until(lambda: edges.planner.policies.latest == "v000001", "the planner to load v000001")
        yield edges
    finally:
        for running in reversed(edges.running.values()):
            await running.stop()
        await watcher.stop()


def finite_replay(learner: LearnerServicer) -> bool:
    replay = learner.trainer.replay
    for buffer in (replay.online, replay.offline):
        for episode_id in buffer.episode_ids:
            for ex in buffer.examples(episode_id):
                arrays = (ex.visit_probs, ex.q_values, np.asarray([ex.ret]))
                if not all(np.isfinite(a).all() for a in arrays) or math.isinf(ex.root_value):
                    return False  # root_value is NaN where the step was not searched: that marks, not poisons
    return True


def stored(memory: MemoryServicer) -> list[dict[str, Any]]:
    points, _ = memory.store.client.scroll(memory.store.collection, limit=100_000, with_payload=True)
    return [p.payload or {} for p in points]


def stored_rewards(memory: MemoryServicer) -> list[float]:
    return [float(payload["reward"]) for payload in stored(memory)]


# -- poisoning, end to end ----------------------------------------------------------------------------

async def test_a_poisoned_episode_is_dead_lettered_and_theta_stays_finite(edges: Edges) -> None:
    async with channel(edges.settings.endpoint("planner").target) as pch, \
            channel(edges.settings.endpoint("learner").target) as lch:
        planner, learner = planner_pb2_grpc.PlannerServiceStub(pch), learner_pb2_grpc.LearnerServiceStub(lch)
        await play(planner, "mcts-1", "mcts")
        poisoned = gold_episode("twx:coin", 2, "poison-1", max_steps=4)
        poisoned.steps[0].reward = math.nan  # the probe of issue 15: a NaN reward and mismatched targets
        del poisoned.steps[1].target.q_values[1:]
        await edges.watcher.publish(Subjects.EPISODE_COMPLETED, poisoned)
        await until(lambda: edges.letters_of("learner-episode-completed"), "the learner's dead letter")
        (letter,) = edges.letters_of("learner-episode-completed")
        assert letter.error.startswith("rejected: steps[0].reward is nan, not a finite number")
        assert events_pb2.EpisodeCompleted.FromString(letter.payload).episode_id == "poison-1"
        err = await rpc_error(learner.Train(learner_pb2.TrainRequest(steps=1, episode_ids=["poison-1"],
                                                                     wait_seconds=0.5)))
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "poison-1" in (err.details() or "")

        reply = await learner.Train(learner_pb2.TrainRequest(steps=3, episode_ids=["mcts-1"], wait_seconds=30))
        assert all(math.isfinite(v) for v in reply.losses.values()) and finite_replay(edges.learner)
        await until(lambda: edges.planner.policies.latest == reply.policy_version, "the planner to load it")
        updates = await play(planner, "theta-1", "policy+mcts")
        priors = [s.prior for s in updates[0].search.root]
        assert all(math.isfinite(p) for p in priors) and abs(sum(priors) - 1) < 1e-3
        assert max(priors) - min(priors) > 1e-4  # θ's priors, not uniform


def poison(source: Path, target: Path, version: int) -> None:
    """A copy of an exported policy under another version with every weight NaN (a corrupted or rogue file)."""
    model = onnx.load(str(source))
    for i, weight in enumerate(model.graph.initializer):
        values = numpy_helper.to_array(weight)
        if values.dtype.kind == "f":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.full_like(values, np.nan), weight.name))
    for prop in model.metadata_props:
        if prop.key == "evoskill.policy_version":
            prop.value = str(version)
    onnx.save(model, str(target))


async def test_the_planner_refuses_a_policy_that_is_not_finite_and_keeps_serving(edges: Edges) -> None:
    registry = PolicyRegistry(edges.settings.state_dir / "learner" / "policies")
    served = edges.planner.policies.latest
    latest = registry.latest()
    assert latest is not None and served == latest.version
    number = latest.number + 1
    poison(registry.path(latest), registry.directory / policy_file_name(number), number)
    bad = registry.add(number, registry.directory / policy_file_name(number), {}).version
    await edges.watcher.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version=bad))
    await until(lambda: number in edges.planner.policies._refused, "the planner to refuse the unfit version")
    assert edges.planner.policies.latest == served

    async with channel(edges.settings.endpoint("planner").target) as pch, \
            channel(edges.settings.endpoint("learner").target) as lch:
        planner, learner = planner_pb2_grpc.PlannerServiceStub(pch), learner_pb2_grpc.LearnerServiceStub(lch)
        err = await rpc_error(play(planner, "pinned-bad", "policy", version=bad))
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"policy {bad} is not fit to serve and is refused: weight" in (err.details() or "")
        await learner.SetServing(learner_pb2.SetServingRequest(version=bad, reason="a rogue promotion"))
        await edges.settled()
        assert edges.planner.policies.serving == ""  # the promotion was refused: the latest good one serves
        await play(planner, "after-bad", "policy+mcts")
        await learner.SetServing(learner_pb2.SetServingRequest(version=served, reason="rollback"))
        # The learner never hands the taken number out again: its next version comes after the rogue one.
        reply = await learner.Train(learner_pb2.TrainRequest(steps=1))
        assert reply.policy_version == f"v{number + 1:06d}"
    await until(lambda: edges.planner.policies.latest == reply.policy_version, "the planner to load the next one")


# -- oversized messages ---------------------------------------------------------------------------------

def oversized(subject: str, size: int) -> Message:
    """A message of about `size` bytes on `subject` that breaks a limit (a text, id or version too long)."""
    big = "x" * size
    transition = common_pb2.Transition(episode_id="big", action=common_pb2.Action(text="go"),
                                       after=common_pb2.Observation(text=big))
    return {
        Subjects.STEP_EXECUTED: events_pb2.StepExecuted(transition=transition),
        Subjects.REWARD_SCORED: events_pb2.RewardScored(transition=transition, total=0.1),
        Subjects.EPISODE_COMPLETED: events_pb2.EpisodeCompleted(episode_id=big),
        Subjects.POLICY_PUBLISHED: events_pb2.PolicyPublished(version=big),
        Subjects.POLICY_SERVING: events_pb2.PolicyServing(version="v000001", reason=big),
    }[subject]


def good(subject: str, tag: str) -> Message:
    transition = common_pb2.Transition(episode_id=f"after-{tag}", action=common_pb2.Action(text="look"),
                                       before=common_pb2.Observation(text="You are in the kitchen.", goal="coin"),
                                       after=common_pb2.Observation(text="Still the kitchen."), env_spec="twx:coin")
    return {
        Subjects.STEP_EXECUTED: events_pb2.StepExecuted(transition=transition),
        Subjects.REWARD_SCORED: events_pb2.RewardScored(transition=transition, total=0.1),
        Subjects.EPISODE_COMPLETED: gold_episode("twx:coin", 3, f"after-{tag}", max_steps=2),
        Subjects.POLICY_PUBLISHED: events_pb2.PolicyPublished(version="v000001"),  # old news: nothing to load
        Subjects.POLICY_SERVING: events_pb2.PolicyServing(version="v000001", reason="re-read the pointer"),
    }[subject]


async def test_an_oversized_message_on_every_consumed_subject_is_dead_lettered_once(edges: Edges) -> None:
    bus = edges.watcher
    max_payload = bus.broker.config.connection_state.connection.max_payload  # type: ignore[attr-defined]
    tag = uuid.uuid4().hex[:6]
    sent: dict[str, bytes] = {}
    for subject in dict.fromkeys(edges.durables().values()):
        data = oversized(subject, max_payload - 4096).SerializeToString()
        assert len(data) > bus.payloads.limit - 4096  # too large to travel whole inside a dead letter
        sent[subject] = data
        # Raw, as an attacker would: the message fits the server's max_payload, not the services' limits.
        # The server acks a message near 1 MiB slowly on two loaded cores: nats-py's 0.5 s default timed out.
        await bus.broker.publish(data, bus.subject(subject), stream=bus.stream.name, timeout=30.0)
        await bus.publish(subject, good(subject, tag))
    await edges.settled()
    for durable, subject in edges.durables().items():
        digest = hashlib.sha256(sent[subject]).hexdigest()
        letters = [x for x in edges.letters_of(durable) if x.payload_sha256 == digest]
        assert len(letters) == 1, durable  # once: the letter resolved the message, nothing is redelivered
        (letter,) = letters
        assert letter.payload_truncated and letter.payload_size == len(sent[subject])
        assert sent[subject].startswith(letter.payload) and len(letter.payload) > 1000
        assert "over the limit of" in letter.error and len(letter.error) < 1100
    # ... and each consumer went on: the good message after it was handled.
    await until(lambda: edges.learner.trainer.has(f"after-{tag}"), "the learner to store the next episode")
    memory = edges.servicer("memory")
    await until(lambda: any(p["episode_id"] == f"after-{tag}" for p in stored(memory)), "the memory's next step")


# -- random requests and events ------------------------------------------------------------------------

def _class(descriptor: Any) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


def call(ch: grpc.Channel, method: MethodDescriptor, request: Message | list[Message],
         timeout: float | None = None) -> Message | None:
    """One call of `method` with what hypothesis drew; the reply (None for a stream's) or the RpcError raised."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    reply_type = _class(method.output_type)
    timeout = timeout or (20.0 if method.name in ("PlayEpisode", "Train", "CreateSession") else 10.0)
    if method.client_streaming:
        items = request if isinstance(request, list) else [request]
        return ch.stream_unary(path, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=reply_type.FromString)(iter(items), timeout=timeout)
    assert not isinstance(request, list)
    if method.server_streaming:
        stream = ch.unary_stream(path, request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=reply_type.FromString)(request, timeout=timeout)
        for update in stream:
            assert all(math.isfinite(x) for x in numbers(update))
        return None
    return ch.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),  # type: ignore[no-any-return]
                          response_deserializer=reply_type.FromString)(request, timeout=timeout)


def valid_requests(session_id: str) -> dict[str, Message]:
    """A request of each method that is served as asked (`session_id`: an open sandbox session)."""
    transition = good(Subjects.STEP_EXECUTED, "valid").transition  # type: ignore[attr-defined]
    search = planner_pb2.SearchConfig(num_simulations=4, rollout_depth=2, agent="random")
    return {
        "CreateSession": sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1, fold="train"),
        "Step": sandbox_pb2.StepRequest(session_id=session_id, action="look around"),
        "Simulate": sandbox_pb2.SimulateRequest(session_id=session_id, gamma=0.9, probes=[
            sandbox_pb2.Probe(actions=["look around"], rollout_depth=2)]),
        "CloseSession": sandbox_pb2.CloseSessionRequest(session_id=session_id),
        "Score": reward_pb2.ScoreRequest(transition=transition),
        "Store": memory_pb2.StoreRequest(experiences=[memory_pb2.Experience(goal="coin", state="kitchen",
                                                                            action="look", reward=0.5)]),
        "Retrieve": memory_pb2.RetrieveRequest(goal="coin", state="kitchen"),
        "Search": planner_pb2.SearchRequest(session_id=session_id, config=planner_pb2.SearchConfig(
            num_simulations=4, rollout_depth=2, agent="mcts")),
        "PlayEpisode": planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=1, max_steps=2, config=search),
        "Train": learner_pb2.TrainRequest(steps=1),
        "GetPolicy": learner_pb2.GetPolicyRequest(version="1"),
        "SetServing": learner_pb2.SetServingRequest(version="1", reason="a test"),
        "ImportEpisodes": learner_pb2.ImportEpisodesRequest(episode=gold_episode("twx:coin", 4, "import-1", 2)),
    }


def requests_of(service: ServiceDescriptor,
                valid: dict[str, Message]) -> st.SearchStrategy[tuple[MethodDescriptor, Any]]:
    """Any request of any method of `service`: random, or a valid one with one field random."""
    def draw(method: MethodDescriptor) -> st.SearchStrategy[tuple[MethodDescriptor, Any]]:
        base = valid.get(method.name)
        drawn = messages(method.input_type) if base is None else st.one_of(messages(method.input_type),
                                                                           perturbed(base))
        return st.tuples(st.just(method), st.lists(drawn, max_size=3) if method.client_streaming else drawn)

    return st.sampled_from(list(service.methods)).flatmap(draw)


# The services answering on the event loop draw from the global `random` while hypothesis draws in its thread.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.parametrize("service", list(PROTOS))
async def test_random_requests_are_never_answered_internal_or_unknown(edges: Edges, service: str) -> None:
    target = edges.settings.endpoint(service).target
    seen: set[grpc.StatusCode] = set()
    async with channel(edges.settings.endpoint("sandbox").target) as ch:
        session = await sandbox_pb2_grpc.SandboxServiceStub(ch).CreateSession(
            sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=2, fold="train"))
    valid = valid_requests(session.session_id)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(requests_of(PROTOS[service], valid))
    def check(drawn: tuple[MethodDescriptor, Any]) -> None:
        method, request = drawn
        with grpc.insecure_channel(target) as ch:
            try:
                reply = call(ch, method, request)
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                seen.add(code)
                assert code not in NEVER, f"{method.name}: {code} {exc.details()}"  # type: ignore[attr-defined]
                assert len(exc.details() or "") < 1100  # type: ignore[attr-defined]
                return
        seen.add(grpc.StatusCode.OK)
        assert reply is None or all(math.isfinite(x) for x in numbers(reply)), f"{method.name}: {reply}"

    await asyncio.to_thread(check)
    assert grpc.StatusCode.INVALID_ARGUMENT in seen
    # Random draws may all be refused (or run out of time on a loaded machine): the valid request of each
    # method, on a fresh session, is served after them — the random ones broke nothing.
    async with channel(edges.settings.endpoint("sandbox").target) as ch:
        fresh = await sandbox_pb2_grpc.SandboxServiceStub(ch).CreateSession(
            sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=3, fold="train"))

    def serve_valid() -> None:
        valid = valid_requests(fresh.session_id)  # a policy's bytes: as large as the project's clients take
        with grpc.insecure_channel(target, [("grpc.max_receive_message_length", 64 * 1024 * 1024)]) as ch:
            for method in sorted(PROTOS[service].methods, key=lambda m: m.name == "CloseSession"):  # it last
                if method.name in valid:
                    call(ch, method, valid[method.name], timeout=120.0)

    await asyncio.to_thread(serve_valid)
    assert finite_replay(edges.learner)
    assert all(math.isfinite(r) for r in stored_rewards(edges.servicer("memory")))


@pytest.mark.parametrize("service", list(PROTOS))
async def test_undecodable_bytes_answer_invalid_argument_on_every_method(edges: Edges, service: str) -> None:
    async with channel(edges.settings.endpoint(service).target) as ch:
        for method in PROTOS[service].methods:
            path = f"/{method.containing_service.full_name}/{method.name}"
            raw: Callable[..., Any]
            if method.client_streaming:
                raw = ch.stream_unary(path)
                pending = raw(iter([b"\xff\xff\xff"]))
            elif method.server_streaming:
                pending = ch.unary_stream(path)(b"\xff\xff\xff").read()
            else:
                pending = ch.unary_unary(path)(b"\xff\xff\xff")
            err = await rpc_error(pending)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, method.name
            assert "cannot decode the request" in (err.details() or ""), method.name


def issue_probes() -> list[tuple[str, str, Message, grpc.StatusCode, str]]:
    """The bad requests the issue's probe sent, each at its service's real edge: (service, method, request,
    the status, what its message names)."""
    nan_reward = good(Subjects.STEP_EXECUTED, "nan").transition  # type: ignore[attr-defined]
    nan_reward.env_reward = math.nan
    huge_id = good(Subjects.STEP_EXECUTED, "huge").transition  # type: ignore[attr-defined]
    huge_id.episode_id = "e" * 1_000_000
    bad_puct = planner_pb2.SearchConfig(agent="mcts", num_simulations=4, c_puct=math.nan)
    return [
        ("reward", "Score", reward_pb2.ScoreRequest(transition=nan_reward), grpc.StatusCode.INVALID_ARGUMENT,
         "transition.env_reward is nan"),  # not a total of nan, nor one republished on reward.scored
        ("reward", "Score", reward_pb2.ScoreRequest(transition=huge_id), grpc.StatusCode.INVALID_ARGUMENT,
         "transition.episode_id is 1000000 characters"),
        ("memory", "Store", memory_pb2.StoreRequest(experiences=[memory_pb2.Experience(
            goal="coin", state="kitchen", action="look", reward=math.inf)]), grpc.StatusCode.INVALID_ARGUMENT,
         "experiences[0].reward is inf"),
        ("planner", "PlayEpisode", planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=1, max_steps=2,
                                                                  config=bad_puct),
         grpc.StatusCode.INVALID_ARGUMENT, "config.c_puct is nan"),
        ("planner", "PlayEpisode", planner_pb2.PlayEpisodeRequest(env_spec="twx:" + "c" * 1_000_000, max_steps=2),
         grpc.StatusCode.INVALID_ARGUMENT, "env_spec is 1000004 characters"),
        ("planner", "Search", planner_pb2.SearchRequest(session_id="s-gone", config=planner_pb2.SearchConfig(
            agent="mcts", num_simulations=4)), grpc.StatusCode.NOT_FOUND, "s-gone"),  # the sandbox's own status
        ("sandbox", "CreateSession", sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", step_quota=-1),
         grpc.StatusCode.INVALID_ARGUMENT, "step_quota"),
        ("sandbox", "CreateSession", sandbox_pb2.CreateSessionRequest(env_spec="x" * 1_000_000),
         grpc.StatusCode.INVALID_ARGUMENT, "env_spec is 1000000 characters"),
    ]


@pytest.mark.parametrize("probe", range(len(issue_probes())))
async def test_the_issues_bad_requests_are_refused_naming_the_field_bounded(edges: Edges, probe: int) -> None:
    service, method, request, code, named = issue_probes()[probe]
    async with channel(edges.settings.endpoint(service).target) as ch:
        rpc = ch.unary_stream if method == "PlayEpisode" else ch.unary_unary
        reply_type = _class(PROTOS[service].methods_by_name[method].output_type)
        pending = rpc(f"/{PROTOS[service].full_name}/{method}", request_serializer=lambda m: m.SerializeToString(),
                      response_deserializer=reply_type.FromString)(request)
        err = await rpc_error(pending.read() if method == "PlayEpisode" else pending)  # type: ignore[union-attr]
    assert err.code() == code, err.details()
    assert named in (err.details() or "") and len(err.details() or "") < 1100


EVENTS = {Subjects.STEP_EXECUTED: events_pb2.StepExecuted, Subjects.REWARD_SCORED: events_pb2.RewardScored,
          Subjects.EPISODE_COMPLETED: events_pb2.EpisodeCompleted,
          Subjects.POLICY_PUBLISHED: events_pb2.PolicyPublished, Subjects.POLICY_SERVING: events_pb2.PolicyServing}


async def test_random_events_never_make_a_consumer_retry_a_bug_or_store_a_non_finite_number(
    edges: Edges, caplog: pytest.LogCaptureFixture
) -> None:
    drawn: list[tuple[str, Message]] = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(list(EVENTS)).flatmap(lambda s: st.tuples(st.just(s), messages(EVENTS[s]))))
    def collect(event: tuple[str, Message]) -> None:
        drawn.append(event)

    collect()
    caplog.set_level(logging.WARNING, logger="evoskill")
    for subject, event in drawn:
        await edges.watcher.publish(subject, event)
    await edges.settled()
    bugs = [r for r in caplog.records if r.levelno >= logging.ERROR and "delivery %d failed" in str(r.msg)]
    assert not bugs, [r.getMessage() for r in bugs]
    assert finite_replay(edges.learner)
    assert all(math.isfinite(r) for r in stored_rewards(edges.servicer("memory")))
    async with channel(edges.settings.endpoint("learner").target) as ch:  # θ trained on what got in is finite
        reply = await learner_pb2_grpc.LearnerServiceStub(ch).Train(learner_pb2.TrainRequest(steps=2))
    assert all(math.isfinite(v) for v in reply.losses.values())
