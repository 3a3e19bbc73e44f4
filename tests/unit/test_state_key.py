"""One definition of "the same state": what the sandbox, the search model, the reward and curiosity compare."""

from __future__ import annotations

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.state_key import state_key


def test_state_key_ignores_case_and_spacing_but_not_content() -> None:
    kitchen = state_key(Observation(look="Kitchen.  A fridge.", inventory="a knife"))
    assert kitchen == state_key(Observation(look="kitchen. a fridge.", inventory="A knife", text="other"))
    assert kitchen != state_key(Observation(look="Kitchen. A fridge.", inventory="nothing"))


def test_feedback_counts_only_where_no_room_is_described() -> None:
    room = Observation(look="A hall.", inventory="", valid_actions=["close door", "go north"])
    already = Observation(look="A hall.", text="That is already closed.", valid_actions=["go north", "close door"])
    assert state_key(room) == state_key(already)  # the feedback and the order of actions change nothing
    assert state_key(Observation(text="You see a key.")) != state_key(Observation(text="You see a door."))


def test_score_the_end_and_the_offered_actions_are_part_of_the_state() -> None:
    base = Observation(look="A hall.", score=0.5, valid_actions=["go north"])
    changed = [Observation(look="A hall.", score=0.6, valid_actions=["go north"]),
               Observation(look="A hall.", score=0.5, done=True, won=True, valid_actions=["go north"]),
               Observation(look="A hall.", score=0.5, valid_actions=["go north", "take key"])]
    assert all(state_key(o) != state_key(base) for o in changed)
