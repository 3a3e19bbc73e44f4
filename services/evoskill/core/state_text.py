"""A state and its candidates as text, the one view the learner, the planner's θ and the memory all share
(torch-free).

What θ reads of a state: the goal, with the notes the agent has taken so far (the text of the last
document it read: a recipe, instructions); the feedback, room and inventory; and each candidate action,
marked where it leads back to a state the episode has already been in; where θ was trained so, the
last actions taken, the rooms each candidate leads to and whether an action of its kind raised the score
before. The notes, the actions and the marks are the episode's memory: a state's own text shows only the
present.
"""

from __future__ import annotations

from collections.abc import Sequence

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.rooms import leads_mark
from evoskill.envs.base import heuristic_template

NOTE_VERBS = ("read",)  # actions whose feedback is worth keeping: the document that was read
SEEN_MARK = " (been there)"
NOTES_HEADER = "\nNotes: "  # between the goal and the notes in the goal text
RECENT_HEADER = "You did: "  # before the last actions taken, after the observation
SCORED_MARK = " (scored before)"
MAX_RECENT = 8  # the most last actions θ reads (learner.recent_actions)


def state_text(observation: Observation, notes: str = "", recent: Sequence[str] = ()) -> tuple[str, str]:
    """(goal and notes, observation text) of a state: the feedback, then the room and the inventory where
    the adapter gives them (the feedback alone rarely says where the agent is), then the `recent` actions."""
    parts = [observation.text]
    parts += [p for p in (observation.look, observation.inventory) if p and p != observation.text]
    goal = f"{observation.goal}{NOTES_HEADER}{notes}" if notes else observation.goal
    return goal, with_recent("\n".join(p for p in parts if p), recent)


def with_recent(observation_text: str, recent: Sequence[str]) -> str:
    """The observation text followed by the last actions taken, oldest first: where a goal is a list of
    instructions ("go east. Then, move south. ...") they say how far along it the episode is."""
    return f"{observation_text}\n{RECENT_HEADER}{'; '.join(recent)}" if recent else observation_text


def scored_before(actions: Sequence[str], scored: Sequence[str]) -> list[bool]:
    """Per action: an action of its kind (`heuristic_template`: "focus on X") raised the score earlier in the
    episode (`scored`, the actions that did). ScienceWorld's "focus on" commits the episode to one thing: a θ
    that cannot see it has focused focuses again, on an orange, and the task can no longer be won. A mark on
    the candidate, not the actions in the state's text: there their words ("go to outside") matched candidates
    that name them ("focus on outside")."""
    kinds = {heuristic_template(a) for a in scored}
    return [bool(kinds) and heuristic_template(a) in kinds for a in actions]


def is_note(action: str) -> bool:
    """Whether `action`'s feedback becomes the agent's notes (`read cookbook`)."""
    verb = action.split(" ", 1)[0].lower()
    return verb in NOTE_VERBS


def notes_after(notes: str, action: str, feedback: str) -> str:
    """The notes once `action` has answered `feedback`: a read document replaces them."""
    return feedback.strip() if is_note(action) and feedback.strip() else notes


def notes_along(notes: str, actions: Sequence[str], feedbacks: Sequence[str]) -> str:
    """The notes after a sequence of steps (`feedbacks[i]` answered `actions[i]`)."""
    for action, feedback in zip(actions, feedbacks, strict=True):
        notes = notes_after(notes, action, feedback)
    return notes


def candidate_text(action: str, seen: bool, leads: Sequence[str] = (), scored: bool = False) -> str:
    """A candidate action as θ reads it: marked when it leads back to a state the episode has already
    been in (without the mark a greedy θ walks between two rooms forever), and with the known rooms it
    leads toward where θ reads the episode's map (`core.rooms`), and `scored` where an action of its kind
    raised the score before (`scored_before`, where θ was trained so); learner, planner search and θ alone
    all use it."""
    # The seen mark last: the reader takes it off the end as a feature (learn/tokens.py); the rooms are read.
    return action + leads_mark(leads) + (SCORED_MARK if scored else "") + (SEEN_MARK if seen else "")
