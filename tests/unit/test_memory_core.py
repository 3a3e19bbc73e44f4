"""Memory core: experience <-> payload, stable point ids, re-ranking by reward and MMR diversity."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput
from evoskill.core.memory import (
    experience_from_transition,
    experience_key,
    from_payload,
    mmr,
    normalised_rewards,
    point_id,
    rank,
    relevance,
    to_payload,
)
from evoskill.memory.v1 import memory_pb2

texts = st.text(max_size=40)
experiences = st.builds(
    memory_pb2.Experience,
    goal=texts, state=texts, action=texts, template=texts, feedback=texts, env_spec=texts,
    episode_id=st.text(min_size=1, max_size=20), step_index=st.integers(0, 10_000),
    reward=st.floats(-100, 100), success=st.booleans(),
    metadata=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)


@given(experiences)
def test_payload_round_trip_keeps_every_field_and_names_the_key(experience: memory_pb2.Experience) -> None:
    back = from_payload(to_payload(experience))
    assert back.id == f"{experience.episode_id}/{experience.step_index}"
    back.id = ""
    assert back == experience


@given(st.text(min_size=1, max_size=20), st.integers(0, 10_000), texts, texts)
def test_point_ids_depend_on_episode_and_step_only(episode: str, step: int, goal: str, other_goal: str) -> None:
    a = memory_pb2.Experience(episode_id=episode, step_index=step, goal=goal)
    b = memory_pb2.Experience(episode_id=episode, step_index=step, goal=other_goal, reward=1.0)
    assert point_id(experience_key(a)) == point_id(experience_key(b))
    uuid.UUID(point_id(experience_key(a)))  # Qdrant takes UUIDs or integers
    c = memory_pb2.Experience(episode_id=episode, step_index=step + 1, goal=goal)
    assert point_id(experience_key(c)) != point_id(experience_key(a))


def test_point_ids_are_the_same_in_every_process() -> None:
    # Fixed value: the namespace must never change, or re-storing after an upgrade would duplicate points.
    assert point_id("ep-1/3") == str(uuid.uuid5(uuid.UUID("5b0f1f2e-6a53-4c1d-9a57-3f0e9b7a1c42"), "ep-1/3"))


def test_without_an_episode_the_key_is_a_digest_of_the_content() -> None:
    a = memory_pb2.Experience(goal="g", state="s", action="a")
    assert experience_key(a) == experience_key(memory_pb2.Experience(goal="g", state="s", action="a", reward=3))
    assert experience_key(a) != experience_key(memory_pb2.Experience(goal="g", state="s", action="b"))
    assert experience_key(memory_pb2.Experience(id="mine", episode_id="e")) == "mine"


def test_a_transition_becomes_an_experience_of_the_state_before_the_action() -> None:
    transition = common_pb2.Transition(
        episode_id="ep", step_index=4, env_spec="twx:coin",
        before=common_pb2.Observation(goal="find the coin", text="You are in the kitchen.", inventory="a key"),
        action=common_pb2.Action(text="move north", template="move X"),
        after=common_pb2.Observation(goal="find the coin", text="You see a coin.", won=True),
        failure=common_pb2.Failure(kind=common_pb2.FAILURE_KIND_NONE),
    )
    experience = experience_from_transition(transition, 1.5)
    assert (experience.goal, experience.action, experience.template, experience.feedback) == (
        "find the coin", "move north", "move X", "You see a coin.")
    assert experience.state == "You are in the kitchen.\na key"
    assert (experience.reward, experience.success, experience.id) == (1.5, True, "ep/4")
    assert experience_from_transition(transition, 1.5, success=False).success is False
    transition.action.text = ""
    with pytest.raises(InvalidInput, match="action"):
        experience_from_transition(transition, 0.0)


@given(st.lists(st.floats(-1e6, 1e6), max_size=20))
def test_normalised_rewards_span_zero_to_one(rewards: list[float]) -> None:
    r = normalised_rewards(rewards)
    assert r.shape == (len(rewards),)
    if rewards:
        assert r.min() >= 0 and r.max() <= 1
        assert r.max() == (1.0 if max(rewards) > min(rewards) else 0.0)


def test_reward_weight_breaks_a_similarity_tie_toward_the_better_reward() -> None:
    assert relevance([0.8, 0.8], [0.0, 2.0], 0.0).tolist() == [0.8, 0.8]
    ranked = rank([0.8, 0.8, 0.5], [0.0, 2.0, 1.0], np.eye(3), reward_weight=0.1, diversity=0.0, limit=3)
    assert [r.index for r in ranked] == [1, 0, 2]
    assert ranked[0].relevance == pytest.approx(0.9) and ranked[0].similarity == 0.8


candidates = st.integers(1, 12).flatmap(lambda n: st.tuples(
    arrays(np.float64, n, elements=st.floats(-1, 2)),
    arrays(np.float64, (n, 4), elements=st.floats(-1, 1)),
    st.integers(0, n + 2),
))


@given(candidates)
def test_mmr_without_diversity_is_the_relevance_order(case) -> None:  # type: ignore[no-untyped-def]
    rel, vectors, limit = case
    assert mmr(rel, vectors, 0.0, limit) == [int(i) for i in np.argsort(-rel, kind="stable")[:limit]]


@given(candidates, st.floats(0, 1))
def test_mmr_picks_distinct_candidates_starting_with_the_most_relevant(case, diversity: float) -> None:  # type: ignore[no-untyped-def]
    rel, vectors, limit = case
    picked = mmr(rel, vectors, diversity, limit)
    assert len(picked) == min(limit, len(rel)) == len(set(picked))
    if picked:
        assert rel[picked[0]] == rel.max()


@given(st.integers(2, 8), st.floats(0.05, 0.95), st.floats(0.5, 1.0))
def test_mmr_spreads_near_duplicates(copies: int, other_relevance: float, diversity: float) -> None:
    # `copies` near-identical memories of one situation outrank one different memory.
    rng = np.random.default_rng(copies)
    base = np.array([1.0, 0.0, 0.0])
    vectors = np.array([*(base + 1e-3 * rng.normal(size=3) for _ in range(copies)), [0.0, 1.0, 0.0]])
    rel = np.array([1.0] * copies + [other_relevance])
    assert mmr(rel, vectors, 0.0, 2) == [0, 1]
    assert mmr(rel, vectors, diversity, 2) == [0, copies]


def test_mmr_rejects_diversity_outside_zero_one() -> None:
    with pytest.raises(InvalidInput, match="diversity"):
        mmr(np.ones(2), np.eye(2), 1.5, 2)
