"""A state and its candidates as text, the one view the learner, the planner's θ and the memory all share
(torch-free)."""

from __future__ import annotations

from evoskill.common.v1.common_pb2 import Observation


def state_text(observation: Observation) -> tuple[str, str]:
    """(goal, observation text) of a state: the feedback, then the room and the inventory where the
    adapter gives them (the feedback alone rarely says where the agent is)."""
    parts = [observation.text]
    parts += [p for p in (observation.look, observation.inventory) if p and p != observation.text]
    return observation.goal, "\n".join(p for p in parts if p)


SEEN_MARK = " (been there)"


def candidate_text(action: str, seen: bool) -> str:
    """A candidate action as θ reads it: marked when it leads back to a state the episode has already
    been in. A state's text shows the present only; the mark is the episode's memory, the one thing a
    greedy θ needs to stop walking between two rooms (learner, planner search and θ alone all use it)."""
    return action + SEEN_MARK if seen else action
