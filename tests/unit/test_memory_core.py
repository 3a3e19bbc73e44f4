"""Memory core: experience <-> payload, stable point ids, units from scored steps and finished episodes, the
retrieval's weights and novelty groups, MMR diversity."""

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
    PROFILES,
    Retrieval,
    cosines,
    env_family,
    experience_from_transition,
    experience_key,
    experiences_from_episode,
    from_payload,
    mmr,
    novelty_penalties,
    outcome_value,
    point_id,
    to_payload,
    weights_for,
)
from evoskill.memory.v1 import memory_pb2
from tests.unit.test_episode_record import played

texts = st.text(max_size=40)
experiences = st.builds(
    memory_pb2.Experience,
    goal=texts, state=texts, action=texts, template=texts, feedback=texts, env_spec=texts,
    episode_id=st.text(min_size=1, max_size=20), step_index=st.integers(0, 10_000),
    reward=st.floats(-100, 100), success=st.booleans(),
    metadata=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    outcome=st.sampled_from([memory_pb2.OUTCOME_PENDING, memory_pb2.OUTCOME_WON, memory_pb2.OUTCOME_LOST]),
    episode_score=st.floats(-1, 1), env_family=texts, session_id=texts, policy_version=texts, agent=texts,
    env_steps=st.integers(0, 10_000), time_unix_ms=st.integers(0, 2**62), seed=st.integers(0, 2**31 - 1),
)


@given(experiences)
def test_payload_round_trip_keeps_every_field_and_names_the_key(experience: memory_pb2.Experience) -> None:
    back = from_payload(to_payload(experience))
    assert back.id == f"{experience.episode_id}/{experience.step_index}"
    assert back.env_family == (experience.env_family or env_family(experience.env_spec))
    back.id, back.env_family = "", experience.env_family
    assert back == experience


def test_a_payload_of_the_release_before_outcomes_reads_as_pending() -> None:
    old = {"id": "e/1", "goal": "g", "action": "a", "reward": 1.0, "success": True, "step_index": 1}
    unit = from_payload(old)
    assert (unit.outcome, unit.success, unit.env_steps, unit.env_family) == (memory_pb2.OUTCOME_PENDING, True, 0, "")


def test_the_payload_carries_what_retrieval_filters_and_scores_by() -> None:
    payload = to_payload(memory_pb2.Experience(goal="g", env_spec="twx:coin?numLocations=5", reward=100.0,
                                               outcome=memory_pb2.OUTCOME_LOST, episode_score=0.25))
    assert (payload["env_family"], payload["outcome"]) == ("twx:coin", "lost")
    assert payload["reward_unit"] == pytest.approx(1.0) and payload["outcome_value"] == pytest.approx(-0.75)


@pytest.mark.parametrize(("outcome", "score", "value"), [
    (memory_pb2.OUTCOME_WON, 0.0, 1.0), (memory_pb2.OUTCOME_PENDING, 1.0, 0.0), (memory_pb2.OUTCOME_LOST, 0.8, -0.2),
    (memory_pb2.OUTCOME_LOST, -50.0, -1.0), (memory_pb2.OUTCOME_LOST, 3.0, 0.0),
])
def test_outcome_value_is_won_one_lost_what_it_fell_short(outcome: int, score: float, value: float) -> None:
    assert outcome_value(outcome, score) == pytest.approx(value)


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
    assert (experience.outcome, experience.env_family) == (memory_pb2.OUTCOME_PENDING, "twx:coin")
    transition.action.text = ""
    with pytest.raises(InvalidInput, match="action"):
        experience_from_transition(transition, 0.0)


@pytest.mark.parametrize("won", [True, False])
def test_a_finished_episode_rewrites_its_scored_steps_with_what_the_end_tells(won: bool) -> None:
    episode, transitions = played(3, width=4, episode_id="ep")
    episode.won, episode.score, episode.policy_version, episode.seed = won, 0.5, "v7", 12
    episode.steps[1].env_steps = 40
    units = experiences_from_episode(episode)
    scored = [experience_from_transition(t, 0.01) for t in transitions]
    # The same points, the same text (so the same vectors): only what the end tells differs.
    assert [(u.id, u.goal, u.state, u.action, u.feedback, u.reward) for u in units] == [
        (s.id, s.goal, s.state, s.action, s.feedback, s.reward) for s in scored]
    assert {(u.outcome, u.success, u.episode_score, u.policy_version, u.seed) for u in units} == {
        (memory_pb2.OUTCOME_WON if won else memory_pb2.OUTCOME_LOST, won, 0.5, "v7", 12)}
    assert [u.env_steps for u in units] == [1, 40, 1]
    episode.episode_id = ""
    with pytest.raises(InvalidInput, match="episode_id"):
        experiences_from_episode(episode)


def test_weights_are_the_profile_with_the_requests_overrides() -> None:
    assert weights_for(PROFILES, "stable") == PROFILES["stable"]
    tuned = weights_for(PROFILES, "exploratory", reward=0.0, novelty=None, diversity=0.9)
    assert (tuned.reward, tuned.novelty, tuned.diversity) == (0.0, PROFILES["exploratory"].novelty, 0.9)
    with pytest.raises(InvalidInput, match="unknown memory profile 'bold'; known: exploratory, stable"):
        weights_for(PROFILES, "bold")
    with pytest.raises(InvalidInput, match="diversity"):
        weights_for(PROFILES, "stable", diversity=1.5)
    with pytest.raises(InvalidInput, match="reward"):
        weights_for(PROFILES, "stable", reward=float("nan"))


@given(st.lists(st.sampled_from(["north", "south", "east", "take coin", ""]), max_size=12))
def test_novelty_groups_give_each_taken_action_one_over_count_plus_one(taken: list[str]) -> None:
    groups = novelty_penalties(taken)
    named = [a for _, actions in groups for a in actions]
    assert len(named) == len(set(named)) == len({a for a in taken if a})
    for lost, actions in groups:
        for action in actions:
            assert 1.0 - lost == pytest.approx(1.0 / (1 + taken.count(action)))


def test_a_retrieval_needs_something_to_retrieve_by_and_positive_sizes() -> None:
    with pytest.raises(InvalidInput, match="goal and state are both empty"):
        Retrieval(goal="", state="", limit=1, recall=1)
    with pytest.raises(InvalidInput, match="limit and recall"):
        Retrieval(goal="g", state="", limit=0, recall=5)
    assert Retrieval(goal="g", state="", limit=8, recall=5).candidates == 8


def test_cosines_are_the_first_stages_similarities() -> None:
    vectors = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 0.0], [-3.0, 0.0]])
    assert cosines(np.array([1.0, 0.0]), vectors) == pytest.approx([1.0, 2**-0.5, 0.0, -1.0])


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
