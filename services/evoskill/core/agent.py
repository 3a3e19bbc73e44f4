"""Agents behind one interface, and the episode memory they read (RLlib's modules behind an `EnvRunner`).

The episode runner (planner/episode.py) owns the episode: at each real state it hands the agent a `Step` —
the sandbox session, the observation, the step's search seed and the episode's `EpisodeMemory` (the states
it has been in, its notes, the actions taken) — and the agent answers with a `Decision`. Agents only read
the memory: the runner records each real step once, so a second agent deciding the same step (the shadow
stage's candidate) sees exactly what the acting one saw and changes nothing.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from evoskill.common.v1.common_pb2 import LlmUsage, Observation
from evoskill.core.errors import InvalidInput
from evoskill.core.rooms import RoomMap, room_of
from evoskill.core.state_key import normalise
from evoskill.core.state_text import notes_after
from evoskill.events.v1.events_pb2 import SearchTarget
from evoskill.planner.v1.planner_pb2 import SearchReply


class AgentKind(StrEnum):
    """Who plays: the names the protos and the CLI carry (`SearchConfig.agent`, `EpisodeCompleted.agent`)."""

    RANDOM = "random"  # a uniformly random valid action: the baseline
    MCTS = "mcts"  # search on uniform priors
    POLICY = "policy"  # θ alone, greedy
    POLICY_MCTS = "policy+mcts"  # search advised by θ
    DEMO = "demo"  # the environment's gold path
    LLM = "llm"  # the LLM's first choice among the candidates and its proposals, no search
    LLM_MCTS = "llm+mcts"  # search on the LLM's priors and proposals

    @property
    def searches(self) -> bool:
        """Searches the state (a `Search` call can run it)."""
        return self in (AgentKind.MCTS, AgentKind.POLICY_MCTS, AgentKind.LLM_MCTS)

    @property
    def uses_llm(self) -> bool:
        """Plays with the LLM (llm.base_url must be set)."""
        return self in (AgentKind.LLM, AgentKind.LLM_MCTS)

    @property
    def uses_policy(self) -> bool:
        """Plays with a published policy (θ)."""
        return self in (AgentKind.POLICY, AgentKind.POLICY_MCTS)

    @property
    def gold_path(self) -> bool:
        """Its session must list the environment's gold path."""
        return self is AgentKind.DEMO

    @classmethod
    def parse(cls, name: str) -> AgentKind:
        """The kind `name` names (empty = mcts, the proto's default); InvalidInput naming the accepted ones."""
        try:
            return cls(name or cls.MCTS)
        except ValueError:
            raise InvalidInput(f"agent {name!r} is not one of {', '.join(cls)}") from None


# Parsers' synonyms of a verb: text games' "examine X", "drop X" are ScienceWorld's listed "look at X", "put down X".
VERB_ALIASES: tuple[tuple[str, str], ...] = (("examine", "look at"), ("drop", "put down"))
_LINKS = frozenset({"in", "on", "to", "into", "from", "with"})  # words that only join an action's objects
# A last qualifier of place, " in X" with no other object after it: "focus on hatchling turtle in outside".
_PLACE = re.compile(r" in (?!.* (?:in|on|to|into|from|with) )[^ ].*$")
_MOST_FORMS = 4  # each form is probed (on ScienceWorld a reset and a replay): the closest few


def _qualified(words: Sequence[str], longer: Sequence[str]) -> bool:
    """`longer` says `words` in order, with the same first and last word and qualifiers between ("move apple seed
    in the seed stage on seed jar to flower pot 3" for ScienceWorld's gold "move apple seed in seed jar to flower
    pot 3")."""
    rest = iter(longer)
    return bool(words) and words[0] == longer[0] and words[-1] == longer[-1] and all(w in rest for w in words)


def _reordered(words: Sequence[str], other: Sequence[str]) -> bool:
    """`words` is `other` with its last object's words in another order: "focus on crocodile egg" (ScienceWorld
    listing objects as the room shows them, `shown_names`) for its gold path's "focus on egg crocodile"."""
    cut = max((i for i, w in enumerate(other) if w in _LINKS), default=0) + 1  # past the verb or the last link
    return (words != other and len(words) == len(other) and words[:cut] == other[:cut]
            and sorted(words[cut:]) == sorted(other[cut:]))


def listed_forms(action: str, listed: Sequence[str]) -> list[str]:
    """The listed actions that may be `action` written otherwise, closest first: its words with qualifiers left
    out or in another order (ScienceWorld's gold paths say "use thermometer in inventory on chocolate", "connect
    solar panel anode to …", "focus on hatchling turtle in outside" where its list says "use thermometer on
    chocolate", "connect anode in solar panel to …", "focus on hatchling turtle"), a word prefix of it or it of
    them, it with qualifiers between its words, or a verb's alias ("examine X" for "look at X"). Only candidates:
    the environment decides which does the same."""
    if action in listed:
        return []
    spellings = {action: 0} | {alias + action[len(verb):]: 0 for verb, alias in VERB_ALIASES
                               if action.startswith(verb + " ")}
    for spelled in list(spellings):
        if (place := _PLACE.search(spelled)) is not None:  # left out: as far as the words it drops
            spellings.setdefault(spelled[:place.start()], len(place.group().split()))
    forms: dict[str, int] = {}
    for candidate in listed:
        far = [d + cost for spelled, cost in spellings.items() if (d := _distance(candidate, spelled)) is not None]
        if far:
            forms[candidate] = min(far)
    return sorted(forms, key=forms.__getitem__)[:_MOST_FORMS]


def _distance(candidate: str, spelled: str) -> int | None:
    """The words one has that the other has not, where `candidate` may be `spelled` written otherwise: one a word
    prefix of the other, `candidate` its words in order with qualifiers between, its last object's words in another
    order, or the same verb and last word with no word `spelled` lacks but joining ones; else None."""
    if candidate.startswith(spelled + " ") or spelled.startswith(candidate + " "):
        return abs(len(candidate.split()) - len(spelled.split()))
    short, long = candidate.split(), spelled.split()
    if len(short) > len(long) and _qualified(long, short):
        return len(short) - len(long)
    if _reordered(short, long):
        return 1
    if not short or not long or short[0] != long[0] or short[-1] != long[-1] or not set(short) - _LINKS <= set(long):
        return None
    return len(set(long) ^ set(short))


@dataclass
class EpisodeMemory:
    """What the episode has been through so far, as its agents read it at each real step."""

    seed: int = 0  # the episode's search seed; each step searches with its own (`step_seed`)
    visited: Counter[str] = field(default_factory=Counter)  # state keys of the real states so far: times there
    notes: str = ""  # the last document the episode read (core.state_text): part of what θ reads
    task_seed: int | None = None  # the game's environment seed (with the env spec, the task); None = not known
    taken: list[str] = field(default_factory=list)  # the actions taken, in order
    scored: list[str] = field(default_factory=list)  # the ones that raised the score, in order
    # (state key, action) -> times taken there: where a candidate leads is unknown until it is stepped
    # (ScienceWorld's hundreds of children are not), but in a deterministic game taking it again where it was
    # taken leads where it led, so the count is a floor on the visits a revisit charge would count.
    tried: Counter[tuple[str, str]] = field(default_factory=Counter)
    # (state key, action) pairs seen to leave the state as it was (the next real state had the same key): what
    # search prunes as a no-op once it has stepped it, θ alone leaves out once the episode has.
    no_ops: set[tuple[str, str]] = field(default_factory=set)
    # The last action and how many times in a row it was just taken without the score rising: where something in
    # the room changes every step (a stove heating, bees moving) no two states share a key, so neither `tried`
    # nor `no_ops` sees θ say "look around" fifty times in a row; the streak does.
    streak: tuple[str, int] = ("", 0)
    stalled: int = 0  # real steps since the score last rose (or since the start): how long θ's play has led nowhere
    rooms: RoomMap = field(default_factory=RoomMap)  # the rooms walked through (core/rooms.py): part of what θ reads
    # Where the episode is as a place: its room, what it carries and its score ("" = no room read). A room whose
    # contents change every step (plants growing, water evaporating) never repeats a state key, so walking
    # between two rooms with nothing gained would never count as a revisit; entering a place does.
    place: tuple[str, str, float] = ("", "", 0.0)
    entered: Counter[tuple[str, str, float]] = field(default_factory=Counter)  # place -> times the episode entered it
    walks_back: int = 0  # entries into a place entered before: walks back with nothing carried or scored since
    llm_tokens: int = 0  # the LLM's tokens (prompt and completion) the episode's steps spent so far
    _last: tuple[str, str] | None = None
    _score: float | None = None

    def step_seed(self, index: int) -> int:
        """A different search seed at every real step: with one seed for all steps, a state search misjudges
        once is misjudged again each time the episode comes back to it (the same noise and rollouts)."""
        return self.seed * 1000 + index

    def times_taken(self, state_key: str, action: str) -> int:
        """A floor on the earlier visits to where an unstepped `action` leads from `state_key` (the state the
        episode is in): the times it was taken there, in a row just now without progress, or, for a move the map
        knows (core/rooms.py), the times the episode entered the room it leads to carrying what it carries now
        at the score it has now, whichever is most."""
        last, times = self.streak
        room, inventory, score = self.place
        to = self.rooms.destination(room, action)
        entries = self.entered[to, inventory, score] if to else 0
        return max(self.tried[state_key, action], times if action == last else 0, entries)

    def record(self, state_key: str, action: str, feedback: str, score: float | None = None,
               moved: tuple[Observation, Observation] | None = None) -> None:
        """One real step: taken in the state keyed `state_key` ("" = the agent never looked it up), answered
        by `feedback`, after which the score was `score` (None = not known); `moved`: the observations
        before and after it, for the map of rooms."""
        if moved is not None:
            self._moved(action, *moved)
            self._score = moved[0].score if self._score is None else self._score  # the score the episode began at
        rose = score is not None and self._score is not None and score > self._score
        last, times = self.streak
        self.streak = (action, 0 if rose else (times + 1 if action == last else 1))
        self.stalled = 0 if rose else self.stalled + 1
        self._score = score if score is not None else self._score
        if state_key:
            if self._last is not None and self._last[0] == state_key:
                self.no_ops.add(self._last)
            self.visited[state_key] += 1
            self.tried[state_key, action] += 1
        self._last = (state_key, action) if state_key else None
        self.notes = notes_after(self.notes, action, feedback)
        self.taken.append(action)
        if rose:
            self.scored.append(action)

    def _moved(self, action: str, before: Observation, after: Observation) -> None:
        """The map and the places entered, from one real step's observations."""
        here, there = room_of(before), room_of(after)
        self.rooms.learn(here, action, there)
        if not self.taken and here:  # where the episode began counts as entered
            self.entered[here, normalise(before.inventory), before.score] += 1
        self.place = (there, normalise(after.inventory), after.score)
        if there and there != here:
            self.walks_back += self.entered[self.place] > 0
            self.entered[self.place] += 1


@dataclass(frozen=True)
class Step:
    """One real state to act in."""

    session_id: str  # the sandbox session standing in it
    observation: Observation  # as the last real step returned it
    index: int
    seed: int  # the search seed of this step (`EpisodeMemory.step_seed`)
    memory: EpisodeMemory


@dataclass
class Decision:
    action: str
    target: SearchTarget  # what the learner is taught for this step (at least the state's candidates)
    search: SearchReply | None = None  # the search's reply, where the agent searched
    state_key: str = ""  # the state it acted in, as the sandbox keys it ("" = not looked up)
    env_steps: int = 0  # environment steps the decision cost (its search's)
    env_seconds: float = 0.0  # of its time, waited on the environment (the rest is the planner's own)
    value: float = math.nan  # its value of the state: the search's root value, θ's own without search
    stepped: Any = None  # the sandbox's StepReply where deciding took the step (the environment judged it)
    llm: LlmUsage | None = None  # what the LLM inside the decision cost, where one was asked
    exploration: str = ""  # why the action is exploratory (core/exploration.py); "" = the agent's own choice


class Agent(Protocol):
    def act(self, step: Step) -> Decision | None:
        """The decision in `step`'s state; None when the agent has nothing more to do (the episode ends)."""
        ...


@dataclass
class RandomAgent:
    """A uniformly random valid action (the baseline every other agent must beat)."""

    rng: random.Random

    def act(self, step: Step) -> Decision:
        actions = list(step.observation.valid_actions)
        return Decision(actions[self.rng.randrange(len(actions))], SearchTarget(actions=actions))


__all__ = ["Agent", "AgentKind", "Decision", "EpisodeMemory", "RandomAgent", "Step"]
