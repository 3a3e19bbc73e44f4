"""The memory service over real gRPC, a real nats-server and Qdrant local mode in the test's folder."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import grpc
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from evoskill.common.v1 import common_pb2
from evoskill.events.v1 import events_pb2
from evoskill.memory.service import create
from evoskill.memory.v1 import memory_pb2, memory_pb2_grpc
from evoskill.platform import metrics
from evoskill.platform.bus import MSG_ID, Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import RunningService, start_service
from tests.integration.test_bus import isolated
from tests.integration.test_metrics import points
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

    # Most similar first; scores are the similarities when nothing else has weight.
    plain = {"reward_weight": 0.0, "outcome_weight": 0.0}
    results = await retrieve(stub, coin, "you are in the kitchen with a fridge", limit=4, **plain)
    assert actions(results)[:2] == ["move east", "move north"]
    assert results[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert results[0].similarity > results[1].similarity > results[2].similarity
    assert [r.score for r in results] == pytest.approx([r.similarity for r in results], abs=1e-5)
    assert results[0].experience.id == "e1/0" and results[0].experience.env_spec == "twx:coin"

    # A reward weight lifts the better experience of an almost equal situation above the closest one;
    # so does the default profile (stable), which weighs the reward.
    results = await retrieve(stub, coin, "you are in the kitchen with a fridge", limit=2, reward_weight=0.5)
    assert actions(results) == ["move north", "move east"]
    assert results[0].experience.success and results[0].experience.reward == 5.0
    assert actions(await retrieve(stub, coin, "you are in the kitchen with a fridge", limit=2)) == [
        "move north", "move east"]
    # Novelty against the session: having moved north twice, the exploratory profile prefers east.
    results = await retrieve(stub, coin, "you are in the kitchen with a fridge", limit=2, profile="exploratory",
                             diversity=0.0, taken_actions=["move north", "move north"])
    assert actions(results) == ["move east", "move north"]

    # The environment filter keeps the others out, however similar; so does the family's.
    results = await retrieve(stub, coin, "you are in the kitchen", env_spec="twx:sorting")
    assert actions(results) == ["take book"]
    assert await retrieve(stub, coin, "kitchen", env_spec="twx:nothing") == []
    assert set(actions(await retrieve(stub, coin, "kitchen", env_family="twx:coin"))) == {"move east", "move north"}


async def test_diversity_spreads_near_duplicates(memory) -> None:  # type: ignore[no-untyped-def]
    _, stub = memory
    goal, state = "open the door", "a locked wooden door and a brass key on the floor"
    copies = [Experience(goal=goal, state=state, action=f"look {i}", episode_id=f"d{i}") for i in range(4)]
    other = Experience(goal=goal, state="the garden with a wooden gate", action="unlock gate", episode_id="d9")
    await stub.Store(memory_pb2.StoreRequest(experiences=[*copies, other]))

    plain = await retrieve(stub, goal, state, limit=2, diversity=0.0)
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


async def test_a_tasks_own_memories_of_this_state_come_first_whatever_their_rank(memory) -> None:  # type: ignore[no-untyped-def]
    _, stub = memory
    here = {"goal": "find the coin", "state": "kitchen, doors east and west", "env_spec": "twx:coin"}
    lost_here = Experience(**here, action="move east", seed=4, episode_id="mine", outcome=memory_pb2.OUTCOME_LOST,
                           reward=-1.0)
    won_elsewhere = [Experience(**here, action="move west", seed=s, episode_id=f"other-{s}", step_index=0,
                                outcome=memory_pb2.OUTCOME_WON, reward=1.0) for s in range(10, 13)]
    pending = Experience(**here, action="move north", episode_id="playing", step_index=1)  # its seed not known yet
    await stub.Store(memory_pb2.StoreRequest(experiences=[lost_here, *won_elsewhere, pending]))
    ranked = await retrieve(stub, here["goal"], here["state"], env_spec="twx:coin", limit=2)
    assert "move east" not in actions(ranked)  # a lost attempt ranks below the won steps of the other games
    results = await retrieve(stub, here["goal"], here["state"], env_spec="twx:coin", limit=2, seed=4)
    assert (results[0].experience.action, results[0].own) == ("move east", True)
    assert [r.own for r in results[1:]] == [False, False] and "move east" not in actions(results[1:])
    assert not [r for r in await retrieve(stub, here["goal"], here["state"], env_spec="twx:coin", seed=0) if r.own]


@pytest.mark.parametrize(("request_fields", "named"), [
    ({}, "goal and state are both empty"),
    ({"goal": "g", "limit": -1}, "limit"),
    ({"goal": "g", "recall": -3}, "recall"),
    ({"goal": "g", "diversity": 1.5}, "diversity"),
    ({"goal": "g", "diversity": -0.1}, "diversity"),
    ({"goal": "g", "profile": "bold"}, "unknown memory profile 'bold'"),
    ({"goal": "g", "outcomes": [7]}, "outcomes"),
    ({"goal": "g", "seed": 3}, "env_spec"),
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


async def dead_letters(settings: Settings) -> tuple[Bus, list[events_pb2.DeadLetter]]:
    """A started bus that publishes the test's events and collects reward.scored's dead letters."""
    watcher = Bus(settings, "watcher")
    letters: list[events_pb2.DeadLetter] = []

    @watcher.consumer(f"{Subjects.DLQ}.{Subjects.REWARD_SCORED}", events_pb2.DeadLetter)
    async def dead(letter: events_pb2.DeadLetter) -> None:
        letters.append(letter)

    await watcher.start()
    return watcher, letters


async def test_scored_steps_become_experiences_and_garbage_is_dead_lettered(memory_settings: Settings) -> None:
    settings = memory_settings
    watcher, letters = await dead_letters(settings)
    running = await start_service("memory", settings, create)
    episode = f"ep-{uuid.uuid4().hex[:6]}"
    # ScienceWorld-sized: its episode.completed is over NATS's max_payload and arrives through the object store.
    completed, transitions = played(60, width=800, episode_id=episode)
    first = transitions[0]
    try:
        async with channel(settings.endpoint("memory").target) as ch:
            stub = memory_pb2_grpc.MemoryServiceStub(ch)
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=first, total=0.5))
            await watcher.broker.publish(b"\xff\xff\xff", watcher.subject(Subjects.REWARD_SCORED),
                                         stream=watcher.stream.name)
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(total=1.0))  # no action: rejected
            await until(lambda: len(letters) == 2, "two dead letters")
            assert all(letter.consumer == "memory-reward-scored" for letter in letters)
            assert {letter.payload for letter in letters} >= {b"\xff\xff\xff"}
            assert any("action" in letter.error for letter in letters)

            async def first_step() -> memory_pb2.Experience:
                (found, *_) = await retrieve(stub, first.before.goal, first.before.text, limit=1,
                                             env_family="sciworld:boil")
                return found.experience

            experience = await first_step()
            assert (experience.id, experience.action, experience.template, experience.feedback) == (
                f"{episode}/0", first.action.text, "move X to Y", first.after.text)
            assert (experience.reward, experience.outcome, experience.env_spec) == (
                0.5, memory_pb2.OUTCOME_PENDING, "sciworld:boil")

            # The episode was won: its steps are written back complete, and a step scored after it ended
            # (the subjects are not ordered) or redelivered does not undo that.
            completed.won, completed.policy_version = True, "v9"
            completed.steps[0].env_steps = 33
            await watcher.publish(Subjects.EPISODE_COMPLETED, completed)
            await until(lambda: stored_count(running) == 60, "the episode's steps stored", within_s=30)
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=first, total=0.5))
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=transitions[1], total=2))
            # The consumer handles its messages in order: once a later episode's step is stored, both were.
            sentinel = common_pb2.Transition()
            sentinel.CopyFrom(first)
            sentinel.episode_id = "later"
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=sentinel, total=0.0))
            await until(lambda: stored_count(running) == 61, "the later episode's step stored")
            assert len(letters) == 2
            experience = await first_step()
            assert (experience.outcome, experience.success, experience.policy_version, experience.env_steps) == (
                memory_pb2.OUTCOME_WON, True, "v9", 33)
            won = await retrieve(stub, first.before.goal, "kitchen", limit=100, outcomes=[memory_pb2.OUTCOME_WON])
            assert len(won) == 60 and all(r.experience.reward == pytest.approx(0.01) for r in won)
    finally:
        await running.stop()
        await watcher.stop()

    # A restart on the same folder finds what was stored.
    running = await start_service("memory", settings, create)
    try:
        assert stored_count(running) == 61
    finally:
        await running.stop()


def with_tiers(settings: Settings, **tiers: object) -> Settings:
    memory = settings.memory.model_copy(update={"tiers": settings.memory.tiers.model_copy(update=tiers)})
    return settings.model_copy(update={"memory": memory})


async def test_the_background_compaction_keeps_every_step_counted_once_through_redeliveries(
        memory_settings: Settings) -> None:
    """Episodes flow in; the service's compactor moves all but the newest cold (hot_max 7, whole episodes of
    4 steps); stored = summarised + hot, and redelivering a cold episode's events (both subjects) adds nothing."""
    settings = with_tiers(memory_settings, hot_max=7, min_age_s=0.0, every_s=0.2, after_writes=0)
    publisher = Bus(settings, "publisher")
    await publisher.start()
    running = await start_service("memory", settings, create)
    episodes = [played(4, width=3, episode_id=f"tier-{i}") for i in range(4)]
    for completed, _ in episodes:
        completed.won = True
    try:
        async with channel(settings.endpoint("memory").target) as ch:
            stub = memory_pb2_grpc.MemoryServiceStub(ch)

            async def totals() -> tuple[int, int]:
                stats = await stub.Stats(memory_pb2.StatsRequest())
                return stats.summarised, stats.hot.points

            for completed, _ in episodes:
                await publisher.publish(Subjects.EPISODE_COMPLETED, completed)

            async def compacted() -> bool:
                summarised, hot = await totals()
                return summarised + hot == 16 and hot == 4

            await until(compacted, "16 steps stored, all but the last episode's 4 summarised cold")
            stats = await stub.Stats(memory_pb2.StatsRequest())
            assert stats.compactions >= 1 and stats.last_compaction_unix_ms > 0 and stats.summarised_episodes == 3
            assert '"hot_max": 7' in stats.limits
            # Redelivered: the first (cold) episode's completion and one of its scored steps; then a new
            # episode on each subject, which the consumers reach only after the redeliveries.
            (first, transitions) = episodes[0]
            await publisher.publish(Subjects.EPISODE_COMPLETED, first)
            await publisher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=transitions[1], total=1))
            later, _ = played(2, width=3, episode_id="tier-later")
            await publisher.publish(Subjects.EPISODE_COMPLETED, later)
            sentinel = common_pb2.Transition()
            sentinel.CopyFrom(transitions[0])
            sentinel.episode_id = "tier-sentinel"
            await publisher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=sentinel, total=0.0))

            async def sentinels_in() -> bool:  # hot holds 7 then, so they stay hot
                reply = await stub.Get(memory_pb2.GetRequest(ids=["tier-later/1", "tier-sentinel/0"]))
                return len(reply.experiences) == 2

            await until(sentinels_in, "the new episodes' steps stored, so the redeliveries were handled")
            assert await totals() == (12, 7)  # the redelivered ones were not stored again
            assert (await stub.Compact(memory_pb2.CompactRequest())).moved == 0
            assert sum(await totals()) == 19
    finally:
        await running.stop()
        await publisher.stop()

    # A restart keeps both tiers.
    running = await start_service("memory", settings, create)
    try:
        stats = running.parts.registrations[0][1].store.stats()
        assert stats.summarised + stats.hot.points == 19
    finally:
        await running.stop()


def batched(settings: Settings, size: int) -> Settings:
    return settings.model_copy(update={"memory": settings.memory.model_copy(update={"batch_size": size})})


async def test_a_pull_is_written_at_once_and_acked_only_once_written(reader: InMemoryMetricReader,
                                                                     memory_settings: Settings) -> None:
    """40 scored steps wait in the stream, 2 of them garbage: the service pulls them 16 at a time, dead-letters
    the garbage with its reason, and writes the other 38 with one upsert a pull. A write that fails is retried
    (nothing acked, nothing lost); a step published again writes nothing new."""
    settings = batched(memory_settings, 16)
    watcher, letters = await dead_letters(settings)
    _, transitions = played(44, width=3, episode_id="batched")
    events = [events_pb2.RewardScored(transition=t, total=0.5) for t in transitions]
    subject = watcher.subject(Subjects.REWARD_SCORED)
    running = None
    try:
        for i, event in enumerate(events[:38]):
            await watcher.publish(Subjects.REWARD_SCORED, event)
            if i == 10:
                await watcher.broker.publish(b"\xff\xff\xff", subject, stream=watcher.stream.name)
            if i == 25:
                await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(total=1.0))  # no action
        running = await start_service("memory", settings, create)
        def batches() -> tuple[int, int]:
            """(writes, messages written) of the consumer."""
            found = [p for p in points(reader, metrics.BUS_BATCH)
                     if p.attributes["messaging.consumer.group.name"] == "memory-reward-scored"]
            return (int(found[0].count), int(found[0].sum)) if found else (0, 0)

        await until(lambda: len(letters) == 2 and batches()[1] == 38, "38 written, 2 dead letters")
        assert stored_count(running) == 38 and batches()[0] <= 4  # 16, 16, 8 pulled: a write per pull
        assert any(letter.payload == b"\xff\xff\xff" and "cannot decode" in letter.error for letter in letters)
        assert any("action text is empty" in letter.error for letter in letters)

        # The store refuses one write: that batch is nacked, redelivered and written; nothing is dead-lettered.
        store = running.parts.registrations[0][1].store
        write, refused = store.store, []

        def flaky(experiences: list[memory_pb2.Experience]) -> int:
            if not refused:
                refused.append(len(experiences))
                raise ConnectionError("Qdrant briefly unavailable")
            return int(write(experiences))

        store.store = flaky
        for event in events[38:43]:
            await watcher.publish(Subjects.REWARD_SCORED, event)
        await until(lambda: stored_count(running) == 43, "the refused batch written on its redelivery")
        # Published again (past JetStream's duplicate window: another message id), then a new step.
        await watcher.publish(Subjects.REWARD_SCORED, events[0], headers={MSG_ID: "again"})
        await watcher.publish(Subjects.REWARD_SCORED, events[43])
        await until(lambda: batches()[1] == 38 + 5 + 2, "both written")
        assert stored_count(running) == 44 and refused and len(letters) == 2
    finally:
        if running is not None:
            await running.stop()
        await watcher.stop()


async def test_a_write_longer_than_ack_wait_is_not_redelivered_meanwhile(memory_settings: Settings) -> None:
    """ack_wait 1 s, a write of 2.5 s: the consumer keeps its messages in progress, so they are written once."""
    settings = memory_settings.model_copy(update={"nats": memory_settings.nats.model_copy(update={"ack_wait_s": 1.0})})
    watcher, letters = await dead_letters(settings)
    running = await start_service("memory", settings, create)
    store = running.parts.registrations[0][1].store
    write, writes = store.store, []

    def slow(experiences: list[memory_pb2.Experience]) -> int:
        writes.append(len(experiences))
        time.sleep(2.5)
        return int(write(experiences))

    store.store = slow
    _, transitions = played(3, width=3, episode_id="slow")
    try:
        for t in transitions:
            await watcher.publish(Subjects.REWARD_SCORED, events_pb2.RewardScored(transition=t, total=0.5))
        await until(lambda: stored_count(running) == 3, "the slow writes done")
        await asyncio.sleep(1.5)  # a redelivery would have come by now
        assert sum(writes) == 3 and not letters
    finally:
        await running.stop()
        await watcher.stop()
