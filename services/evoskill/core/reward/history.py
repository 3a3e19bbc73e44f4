"""What the reward needs to know about the episode so far, and the text normalisation it compares with.

Convention for `Transition.previous_actions` / `previous_observations` (the sandbox fills them):
`previous_actions[i]` is the i-th action of the episode before this step and `previous_observations[i]`
the feedback text that action produced. The reset observation may come first, in which case
`previous_observations` has one element more than `previous_actions`; senders should include it, since
what the agent could see from the start is not a result of its actions. `before.text` is the feedback
of the last previous action (or the reset text), so it is always treated as seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evoskill.common.v1.common_pb2 import Transition
from evoskill.core.state_key import normalise

_WORD = re.compile(r"[a-z0-9]+")

# Words that never name an object or a result: articles, prepositions, pronouns.
STOPWORDS = frozenset(
    {"a", "an", "the", "to", "in", "into", "on", "onto", "from", "with", "at", "of", "for", "by", "up"}
    | {"down", "out", "off", "and", "or", "it", "its", "this", "that", "is", "are", "be", "my", "your"}
    | {"some", "all"}
)


def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def action_arguments(action_text: str, template: str = "") -> frozenset[str]:
    """The words of an action that name things (its slot fillers), not the verb or glue words.

    The first word is the verb; lowercase words of the template ("take X from Y" -> take, from) are literal
    parts of the skill, not arguments (slots are written in capitals or braces).
    """
    tokens = _WORD.findall(action_text.lower())
    literal = {w for w in re.findall(r"[A-Za-z0-9]+", template) if w.islower()}
    return frozenset(w for w in tokens[1:] if w not in STOPWORDS and w not in literal)


@dataclass(frozen=True)
class EpisodeHistory:
    """The earlier steps of the episode: `actions[i]` produced `feedbacks[i]`; `initial` is the reset text."""

    actions: tuple[str, ...] = ()
    feedbacks: tuple[str, ...] = ()
    initial: str = ""

    @classmethod
    def from_transition(cls, transition: Transition) -> EpisodeHistory:
        actions = tuple(transition.previous_actions)
        observations = tuple(transition.previous_observations)
        extra = len(observations) - len(actions)
        initial = observations[0] if extra > 0 else ""
        # Align from the end: the latest feedback belongs to the latest action whatever the sender kept.
        feedbacks = observations[extra:] if extra >= 0 else ("",) * -extra + observations
        return cls(actions=actions, feedbacks=feedbacks, initial=initial)

    def seen_actions(self) -> frozenset[str]:
        return frozenset(normalise(a) for a in self.actions)

    def seen_observations(self, before_text: str) -> frozenset[str]:
        seen = {normalise(f) for f in self.feedbacks}
        seen.add(normalise(before_text))
        if self.initial:
            seen.add(normalise(self.initial))
        return frozenset(seen)

    def revealed_words(self) -> frozenset[str]:
        """Words that earlier results brought in: first seen in a step's feedback, neither known from the
        reset text or earlier steps nor echoed from the action that asked. Words the agent could see all
        along (the starting room) do not count, so the term rewards acting on what actions discovered."""
        known = set(words(self.initial))
        revealed: set[str] = set()
        for action, feedback in zip(self.actions, self.feedbacks, strict=True):
            asked, answered = words(action), words(feedback)
            revealed |= answered - asked - known
            known |= asked | answered
        return frozenset(revealed)
