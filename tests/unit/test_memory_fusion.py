"""Retrieved memories fused into one hint: a logit bonus per candidate (search's root priors and θ alone)
that favours what worked and penalises remembered failures, and one-line tips for an LLM."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evoskill.core.memory.fusion import memory_bonus, memory_value, tips_from_memories
from evoskill.core.memory.retrieval import Situation
from evoskill.memory.v1 import memory_pb2

WON, LOST = memory_pb2.OUTCOME_WON, memory_pb2.OUTCOME_LOST


def scored(action: str, similarity: float = 0.9, *, success: bool = False, reward: float = 0.0, template: str = "",
           feedback: str = "", outcome: int = memory_pb2.OUTCOME_PENDING,
           episode_score: float = 0.0) -> memory_pb2.ScoredExperience:
    experience = memory_pb2.Experience(action=action, template=template, success=success, reward=reward,
                                       feedback=feedback, outcome=outcome, episode_score=episode_score)
    return memory_pb2.ScoredExperience(experience=experience, similarity=similarity, score=similarity)


ACTIONS = ["take coin", "move north", "open door"]
TEMPLATES = ["take X", "move X", "open X"]


def test_an_action_that_succeeded_in_a_similar_state_gets_the_largest_bonus() -> None:
    bonus = memory_bonus(ACTIONS, TEMPLATES, [scored("move north", 0.9, success=True),
                                              scored("take coin", 0.2, success=True)])
    assert int(np.argmax(bonus)) == 1
    assert bonus[1] == pytest.approx(0.9) and bonus[0] == pytest.approx(0.2) and bonus[2] == 0.0


def test_a_failed_step_with_negative_reward_votes_against_its_action() -> None:
    bonus = memory_bonus(ACTIONS, TEMPLATES, [scored("open door", 0.8, reward=-1.0)])
    assert bonus[2] < 0 and bonus[0] == bonus[1] == 0.0


def test_a_matching_template_gets_a_share_of_the_vote() -> None:
    bonus = memory_bonus(ACTIONS, TEMPLATES, [scored("move south", 1.0, success=True, template="move X")],
                         template_share=0.25)
    assert bonus.tolist() == pytest.approx([0.0, 0.25, 0.0])


def test_dissimilar_memories_and_unknown_actions_change_nothing() -> None:
    bonus = memory_bonus(ACTIONS, TEMPLATES, [scored("move north", -0.5, success=True), scored("dance", 1.0)])
    assert not bonus.any()


def test_mismatched_templates_are_rejected() -> None:
    with pytest.raises(ValueError, match="templates"):
        memory_bonus(ACTIONS, TEMPLATES[:2], [])


@given(st.lists(st.tuples(st.sampled_from([*ACTIONS, "dance"]), st.floats(-1, 1), st.booleans(),
                          st.floats(-10, 10)), max_size=30),
       st.floats(0, 5))
def test_the_bonus_is_bounded_by_the_weight(memories, weight: float) -> None:  # type: ignore[no-untyped-def]
    items = [scored(a, s, success=ok, reward=r) for a, s, ok, r in memories]
    bonus = memory_bonus(ACTIONS, TEMPLATES, items, weight=weight)
    assert bonus.shape == (len(ACTIONS),)
    assert np.all(np.abs(bonus) <= weight + 1e-9)


def test_a_lost_episode_votes_against_its_actions_unless_it_nearly_won() -> None:
    assert memory_value(scored("a", outcome=WON, reward=-3.0).experience) == 1.0
    assert memory_value(scored("a", success=True).experience) == 1.0  # stored before outcomes existed
    assert memory_value(scored("a", outcome=LOST, reward=0.0).experience) == pytest.approx(-0.5)
    assert memory_value(scored("a", outcome=LOST, reward=1.0, episode_score=0.9).experience) > 0
    bonus = memory_bonus(ACTIONS, TEMPLATES, [scored("take coin", 1.0, outcome=WON),
                                              scored("open door", 1.0, outcome=LOST, reward=-1.0)])
    assert bonus[0] == pytest.approx(1.0) and bonus[2] < -0.5 and bonus[1] == 0.0


def test_tips_say_what_an_action_did_in_one_line_each() -> None:
    memories = [
        scored("take coin", success=True, reward=1.0, feedback="You take the coin.\n\nYour score went up."),
        scored("open door", reward=-0.5),
        scored("", success=True),  # nothing to recommend
        scored("take coin", success=True, reward=1.0, feedback="You take the coin.\n\nYour score went up."),
        scored("look", reward=0.2),
        scored("wait"),
    ]
    tips = tips_from_memories(memories, limit=10)
    assert len(tips) == 4 and all("\n" not in t for t in tips)
    assert tips[0].startswith("in a similar state, 'take coin' was part of an episode that succeeded")
    assert "You take the coin. Your score went up." in tips[0]
    assert "'open door' was penalised (reward -0.50)" in tips[1]
    assert "'look' earned reward +0.20" in tips[2] and "'wait' achieved nothing" in tips[3]
    assert tips_from_memories(memories, limit=2) == tips[:2]
    (lost,) = tips_from_memories([scored("move west", outcome=LOST)], 3)
    assert "'move west' was part of an episode that failed" in lost
    assert len(tips_from_memories([scored("x", feedback="y" * 500)], 1)[0]) < 150


HERE = Situation("twx:coin", 7, "find the coin", "You are in the kitchen.")


def here_memory(action: str, *, seed: int = 7, state: str = HERE.state, outcome: int = WON,
                similarity: float = 1.0) -> memory_pb2.ScoredExperience:
    experience = memory_pb2.Experience(action=action, env_spec=HERE.env_spec, seed=seed, goal=HERE.goal, state=state,
                                       outcome=outcome, success=outcome == WON)
    # flagged as the memory service flags them (memory/store.py): taken in HERE
    return memory_pb2.ScoredExperience(experience=experience, similarity=similarity, score=similarity,
                                       own=HERE.holds(experience))


def test_a_situation_holds_the_experiences_of_its_task_goal_and_state_only() -> None:
    assert HERE.holds(here_memory("x").experience)
    assert not HERE.holds(here_memory("x", seed=8).experience)
    assert not HERE.holds(here_memory("x", state="A hall.").experience)
    pending = memory_pb2.Experience(env_spec=HERE.env_spec, goal=HERE.goal, state=HERE.state)  # no seed yet
    assert not HERE.holds(pending)
    other_family = here_memory("x").experience
    other_family.env_spec = "twx:cookingworld"
    assert not HERE.holds(other_family)


def test_this_situations_own_memory_outweighs_many_similar_ones() -> None:
    similar = [here_memory("move north", seed=s, similarity=0.95) for s in range(8, 20)]  # other games' kitchens
    memories = [here_memory("open door"), *similar]
    pooled = memory_bonus(ACTIONS, TEMPLATES, memories)
    assert pooled[1] >= pooled[2]  # one pool of cosine votes: the dozen similar rooms win (or tie at the clip)
    bonus = memory_bonus(ACTIONS, TEMPLATES, memories, similar_share=0.3)
    assert int(np.argmax(bonus)) == 2
    assert bonus.tolist() == pytest.approx([0.0, 0.3, 1.0])


def test_similar_memories_count_at_the_share_with_or_without_own_ones() -> None:
    memories = [here_memory("move north", seed=8, similarity=0.9), here_memory("open door", state="A hall.",
                                                                                similarity=0.8)]
    pooled = memory_bonus(ACTIONS, TEMPLATES, memories)
    assert memory_bonus(ACTIONS, TEMPLATES, memories).tolist() == pytest.approx(pooled.tolist())
    assert memory_bonus(ACTIONS, TEMPLATES, memories, similar_share=0.3).tolist() == pytest.approx(
        (0.3 * pooled).tolist())


def test_the_memory_service_flag_marks_an_own_memory() -> None:
    flagged = memory_pb2.ScoredExperience(experience=memory_pb2.Experience(action="open door", success=True),
                                          similarity=0.2, own=True)
    assert memory_bonus(ACTIONS, TEMPLATES, [flagged], similar_share=0.3).tolist() == pytest.approx([0, 0, 1.0])


def test_an_own_failure_counts_against_its_action_in_full() -> None:
    bonus = memory_bonus(ACTIONS, TEMPLATES, [here_memory("take coin", outcome=LOST, similarity=0.6)])
    assert bonus[0] == pytest.approx(-0.5) and bonus[1] == bonus[2] == 0.0  # its value, not 0.6 of it


@given(st.lists(st.tuples(st.sampled_from([*ACTIONS, "dance"]), st.integers(6, 8), st.sampled_from([WON, LOST]),
                          st.floats(-1, 1)), max_size=30),
       st.floats(0, 5), st.floats(0, 1))
def test_the_bonus_with_own_memories_is_bounded(memories, weight: float, share: float) -> None:  # type: ignore[no-untyped-def]
    fused = [here_memory(a, seed=seed, outcome=outcome, similarity=sim) for a, seed, outcome, sim in memories]
    bonus = memory_bonus(ACTIONS, TEMPLATES, fused, weight=weight, similar_share=share)
    assert np.all(np.abs(bonus) <= weight * (1 + share) + 1e-9)
