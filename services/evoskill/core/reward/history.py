"""What the reward needs to know about the episode so far, and the text normalisation it compares with.

The sandbox session owns the episode and keeps its whole history in an `EpisodeLog`; each `Transition`
carries the bounded digest of it (`Transition.history`, see common.proto for why a digest): fingerprints
of the actions taken and of the feedback seen (the reset text included), and the words earlier results
revealed, each kind cut to its most recent entries. `EpisodeHistory` is the reward's view of that digest.
The feedback of the step before (`before.text`) always counts as seen.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from evoskill.common.v1.common_pb2 import HistoryDigest, Transition
from evoskill.core.state_key import normalise

K = TypeVar("K", int, str)
_WORD = re.compile(r"[a-z0-9]+")

# Entries of each kind a transition carries (most recent kept): beyond every episode cap the benchmarks
# use (ScienceWorld's longest is 120 steps), and a few KiB on the wire at most.
HISTORY_LIMIT = 128
REVEALED_LIMIT = 512

# Words that never name an object or a result: articles, prepositions, pronouns.
STOPWORDS = frozenset(
    {"a", "an", "the", "to", "in", "into", "on", "onto", "from", "with", "at", "of", "for", "by", "up"}
    | {"down", "out", "off", "and", "or", "it", "its", "this", "that", "is", "are", "be", "my", "your"}
    | {"some", "all"}
)


def fingerprint(text: str) -> int:
    """64 bits of the normalised text, equal in every process (Python's str hash is salted)."""
    return int.from_bytes(hashlib.blake2b(normalise(text).encode(), digest_size=8).digest(), "little")


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
    """The reward's view of the earlier steps: fingerprints of the actions taken and the feedback seen,
    and the words earlier results revealed."""

    actions: frozenset[int] = frozenset()
    feedbacks: frozenset[int] = frozenset()
    revealed: frozenset[str] = frozenset()

    @classmethod
    def from_transition(cls, transition: Transition) -> EpisodeHistory:
        h = transition.history
        return cls(frozenset(h.actions), frozenset(h.feedbacks), frozenset(h.revealed_words))

    def took(self, action: str) -> bool:
        return fingerprint(action) in self.actions

    def saw(self, text: str, before_text: str) -> bool:
        return normalise(text) == normalise(before_text) or fingerprint(text) in self.feedbacks


def _touch(recent: dict[K, None], item: K) -> None:
    recent.pop(item, None)
    recent[item] = None  # dicts keep insertion order: the last entry is the most recent


def _last(recent: dict[K, None], n: int) -> list[K]:
    return list(recent)[-n:]


@dataclass
class EpisodeLog:
    """The whole history of one episode, where the episode lives (the sandbox session), and the digest
    each of its transitions carries. `known`: every word the episode has shown or said so far."""

    actions: dict[int, None] = field(default_factory=dict)  # fingerprints, least recent first
    feedbacks: dict[int, None] = field(default_factory=dict)
    revealed: dict[str, None] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)

    @classmethod
    def start(cls, initial: str) -> EpisodeLog:
        """After reset: the reset text is seen, and its words were visible from the start (not revealed)."""
        log = cls(known=set(words(initial)))
        if initial:
            _touch(log.feedbacks, fingerprint(initial))
        return log

    def record(self, action: str, feedback: str) -> None:
        """`action` answered `feedback`. A word is revealed when it first shows in a step's feedback,
        neither known before nor echoed from the action that asked."""
        _touch(self.actions, fingerprint(action))
        if feedback:
            _touch(self.feedbacks, fingerprint(feedback))
        asked, answered = words(action), words(feedback)
        for word in sorted(answered - asked - self.known):
            _touch(self.revealed, word)
        self.known |= asked | answered

    def extended(self, steps: Iterable[tuple[str, str]]) -> EpisodeLog:
        """A copy with more (action, feedback) steps: the episode along a simulated path."""
        log = EpisodeLog(dict(self.actions), dict(self.feedbacks), dict(self.revealed), set(self.known))
        for action, feedback in steps:
            log.record(action, feedback)
        return log

    def digest(self) -> HistoryDigest:
        return HistoryDigest(actions=_last(self.actions, HISTORY_LIMIT),
                             feedbacks=_last(self.feedbacks, HISTORY_LIMIT),
                             revealed_words=_last(self.revealed, REVEALED_LIMIT))
