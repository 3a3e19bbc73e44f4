"""Advice on the priors: θ, retrieved memories and an outside ranking as composable transforms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evoskill.core.search.advice import memory_bonus, with_logit_bonus
from evoskill.memory.v1 import memory_pb2


def scored(action: str, similarity: float, *, success: bool = False, reward: float = 0.0,
           template: str = "") -> memory_pb2.ScoredExperience:
    experience = memory_pb2.Experience(action=action, template=template, success=success, reward=reward)
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


def test_the_bonus_adds_to_logits_or_replaces_uniform_priors() -> None:
    bonus = np.array([0.5, 0.0, -0.5])
    assert with_logit_bonus(None, bonus).tolist() == [0.5, 0.0, -0.5]
    wide = np.array([1.0, 1.0, 1.0, 9.0], dtype=np.float32)  # policy rows may be wider than the action count
    assert with_logit_bonus(wide, bonus).tolist() == [1.5, 1.0, 0.5, 9.0]
    assert wide.tolist() == [1.0, 1.0, 1.0, 9.0]
