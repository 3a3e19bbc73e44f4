"""The memory service over real gRPC, a real nats-server and Qdrant local mode in the test's folder."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest

from evoskill.common.v1 import common_pb2
from evoskill.events.v1 import events_pb2
from evoskill.memory.service import create
from evoskill.memory.v1 import memory_pb2, memory_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import RunningService, start_service
from tests.integration.test_bus import isolated
from tests.integration.waiting import rpc_error, until
from tests.unit.test_episode_record import played

pytestmark = pytest.mark.integration

Experience = memory_pb2.Experience


@pytest.fixture
def memory_settings(settings: Settings) -> Settings:
    # Hashed n-grams: no model start-up, and word overlap makes "most similar" predictable.
    return isolated(settings).model_copy(update={"memory": settings.memory.model_copy(update={"featurizer": "hash"})})


@pytest.fixture
async def memory(memory_settings: Settings):  # type: ignore[no-untyped-def]
    running: RunningService = await start_service("memory", memory_settings, create)
    try:
        async with channel(memory_settings.endpoint("memory").target) as ch:
            yield running, memory_pb2_grpc.MemoryServiceStub(ch)
    finally:
        await running.stop()


def stored_count(running: RunningService) -> int:
    return int(running.parts.registrations[0][1].store.count())


async def retrieve(stub, goal: str, state: str, **fields: Any) -> list[memory_pb2.ScoredExperience]:  # type: ignore[no-untyped-def]
    reply = await stub.Retrieve(memory_pb2.RetrieveRequest(goal=goal, state=state, **fields))
    return list(reply.results)


def actions(results: list[memory_pb2.ScoredExperience]) -> list[str]:
    return [r.experience.action for r in results]


async def test_store_then_retrieve_ranks_by_similarity_reward_and_diversity(memory) -> None:  # type: ignore[no-untyped-def]
    running, stub = memory
    coin = "find the golden coin"
    experiences = [
        Experience(goal=coin, state="you are in the kitchen with a fridge", action="move east", env_spec="twx:coin",
                   episode_id="e1", step_index=0, reward=0.0),
        Experience(goal="cook a meal", state="a red apple lies on the counter", action="take apple",
                   env_spec="twx:cooking", episode_id="e2", step_index=0, reward=1.0),
        Experience(goal="sort the books", state="a shelf full of books", action="take book", env_spec="twx:sorting",
                   episode_id="e3", step_index=0, reward=1.0),
        # Nearly the first one's situation: one word more, and a much better reward.
        Experience(goal=coin, state="you are in the kitchen with a fridge open", action="move north",
                   env_spec="twx:coin", episode_id="e4", step_index=0, reward=5.0, success=True),
    ]
    reply = await stub.Store(memory_pb2.StoreRequest(experiences=experiences))
    assert reply.stored == 4 and stored_count(running) == 4

    # Most similar first; scores are the similarities when the reward has no weight.
    results = await retrieve(stub, coin, "you are in the kitchen with a fridge", limit=4)
    assert actions(results)[:2] == ["move east", "move north"]
    assert results[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert results[0].similarity > results[1].similarity > results[2].similarity
    assert [r.score for r in results] == pytest.approx([r.similarity for r in results])
    assert results[0].experience.id == "e1/0" and results[0].experience.env_spec == "twx:coin"

    # A reward weight lifts the better experience of an almost equal situation above the closest one.
    results = await retrieve(stub, coin, "you are in the kitchen with a fridge", limit=2, reward_weight=0.5)
    assert actions(results) == ["move north", "move east"]
    assert results[0].experience.success and results[0].experience.reward == 5.0

    # The environment filter keeps the others out, however similar.
    results = await retrieve(stub, coin, "you are in the kitchen", env_spec="twx:sorting")
    assert actions(results) == ["take book"]
    assert await retrieve(stub, coin, "kitchen", env_spec="twx:nothing") == []


async def test_diversity_spreads_near_duplicates(memory) -> None:  # type: ignore[no-untyped-def]
    _, stub = memory
    goal, state = "open the door", "a locked wooden door and a brass key on the floor"
    copies = [Experience(goal=goal, state=state, action=f"look {i}", episode_id=f"d{i}") for i in range(4)]
    other = Experience(goal=goal, state="the garden with a wooden gate", action="unlock gate", episode_id="d9")
    await stub.Store(memory_pb2.StoreRequest(experiences=[*copies, other]))

    plain = await retrieve(stub, goal, state, limit=2)
    assert all(a.startswith("look") for a in actions(plain))
    spread = await retrieve(stub, goal, state, limit=2, diversity=0.6)
    assert actions(spread)[0].startswith("look") and actions(spread)[1] == "unlock gate"


async def test_store_is_idempotent_by_episode_and_step(memory) -> None:  # type: ignore[no-untyped-def]
    running, stub = memory
    first = Experience(goal="find the coin", state="kitchen", action="move east", episode_id="ep", step_index=2)
    again = Experience(goal="find the coin", state="kitchen", action="move east", episode_id="ep", step_index=2,
                       reward=3.0)
    await stub.Store(memory_pb2.StoreRequest(experiences=[first]))
    await stub.Store(memory_pb2.StoreRequest(experiences=[again, again]))
    assert stored_count(running) == 1
    (only,) = await retrieve(stub, "find the coin", "kitchen")
    assert only.experience.reward == 3.0  # the latest write wins


@pytest.mark.parametrize(("request_fields", "named"), [
    ({}, "goal and state are both empty"),
    ({"goal": "g", "limit": -1}, "limit"),
    ({"goal": "g", "recall": -3}, "recall"),
    ({"goal": "g", "diversity": 1.5}, "diversity"),
    ({"goal": "g", "diversity": -0.1}, "diversity"),
])
async def test_bad_retrieve_is_invalid_argument_naming_the_field(memory, request_fields, named) -> None:  # type: ignore[no-untyped-def]
    _, stub = memory
    err = await rpc_error(stub.Retrieve(memory_pb2.RetrieveRequest(**request_fields)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and named in (err.details() or "")


async def test_bad_store_is_invalid_argument_and_stores_nothing(memory) -> None:  # type: ignore[no-untyped-def]
    running, stub = memory
    good = Experience(goal="g", state="s", action="a", episode_id="x")
    err = await rpc_error(stub.Store(memory_pb2.StoreRequest(experiences=[good, Experience(action="a")])))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "experiences[1]" in (err.details() or "")
    assert stored_count(running) == 0


def scored_step(episode_id: str, step: int, action: str, *, won: bool = False) -> events_pb2.RewardScored:
    transition = common_pb2.Transition(
        episode_id=episode_id, step_index=step, env_spec="twx:coin",
        before=common_pb2.Observation(goal="collect the coin", text=f"You are in room {step}. Exits lead north."),
        action=common_pb2.Action(text=action, template="move X"),
        after=common_pb2.Observation(goal="collect the coin", text="You move.", won=won),
    )
    return events_pb2.RewardScored(transition=transition, total=0.5 + step)


async def test_scored_steps_become_experiences_and_garbage_is_dead_lettered(memory_settings: Settings) -> None:
    settings = memory_settings
    watcher = Bus(settings, "watcher")
    letters: list[events_pb2.DeadLetter] = []

    @watcher.consumer(f"{Subjects.DLQ}.{Subjects.REWARD_SCORED}", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)

    await watcher.start()
    running = await start_service("memory", settings, create)
    episode = f"ep-{uuid.uuid4().hex[:6]}"
    try:
        async with channel(settings.endpoint("memory").target) as ch:
            stub = memory_pb2_grpc.MemoryServiceStub(ch)
            await watcher.publish(Subjects.REWARD_SCORED, scored_step(episode, 0, "move north"))
            await watcher.broker.publish(b"\xff\xff\xff", watcher.subject(Subjects.REWARD_SCORED),
                                         stream=watcher.stream.name)
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(total=1.0))  # no action: rejected
            await until(lambda: len(letters) == 2, "two dead letters")
            assert all(letter.consumer == "memory-reward-scored" for letter in letters)
            assert {letter.payload for letter in letters} >= {b"\xff\xff\xff"}
            assert any("action" in letter.error for letter in letters)

            (found,) = await retrieve(stub, "collect the coin", "You are in room 0. Exits lead north.")
            experience = found.experience
            assert (experience.id, experience.action, experience.template, experience.feedback) == (
                f"{episode}/0", "move north", "move X", "You move.")
            assert (experience.reward, experience.success, experience.env_spec) == (0.5, False, "twx:coin")

            # The episode was won: its stored steps, and those scored after it ended, count as successes.
            # Its event is ScienceWorld-sized, over NATS's max_payload: it arrives through the object store.
            completed, _ = played(60, width=800, episode_id=episode)
            completed.won = True
            await watcher.publish(Subjects.EPISODE_COMPLETED, completed)
            await watcher.publish(Subjects.REWARD_SCORED, scored_step(episode, 1, "take coin", won=True))
            await until(lambda: stored_count(running) == 2, "the second step stored", within_s=15)

            async def successes() -> list[bool]:
                results = await retrieve(stub, "collect the coin", "You are in room", limit=5)
                return [r.experience.success for r in results]

            for _ in range(100):
                if await successes() == [True, True]:
                    break
                await asyncio.sleep(0.05)
            assert await successes() == [True, True]
    finally:
        await running.stop()
        await watcher.stop()

    # A restart on the same folder finds what was stored.
    running = await start_service("memory", settings, create)
    try:
        assert stored_count(running) == 2
        async with channel(settings.endpoint("memory").target) as ch:
            stub = memory_pb2_grpc.MemoryServiceStub(ch)
            results = await retrieve(stub, "collect the coin", "You are in room 1.")
            assert results[0].experience.id == f"{episode}/1"
    finally:
        await running.stop()
