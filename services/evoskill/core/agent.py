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
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from evoskill.common.v1.common_pb2 import LlmUsage, Observation
from evoskill.core.state_text import notes_after
from evoskill.events.v1.events_pb2 import SearchTarget
from evoskill.planner.v1.planner_pb2 import SearchReply


@dataclass
class EpisodeMemory:
    """What the episode has been through so far, as its agents read it at each real step."""

    seed: int = 0  # the episode's search seed; each step searches with its own (`step_seed`)
    visited: Counter[str] = field(default_factory=Counter)  # state keys of the real states so far: times there
    notes: str = ""  # the last document the episode read (core.state_text): part of what θ reads
    taken: list[str] = field(default_factory=list)  # the actions taken, in order

    def step_seed(self, index: int) -> int:
        """A different search seed at every real step: with one seed for all steps, a state search misjudges
        once is misjudged again each time the episode comes back to it (the same noise and rollouts)."""
        return self.seed * 1000 + index

    def record(self, state_key: str, action: str, feedback: str) -> None:
        """One real step: taken in the state keyed `state_key` ("" = the agent never looked it up), answered
        by `feedback`."""
        if state_key:
            self.visited[state_key] += 1
        self.notes = notes_after(self.notes, action, feedback)
        self.taken.append(action)


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


__all__ = ["Agent", "Decision", "EpisodeMemory", "RandomAgent", "Step"]
