"""What one retrieval asks for (seed 004 §2.2), before it becomes a Qdrant query (memory/query.py).

Two stages: vector recall of `recall` candidates under payload filters, then a score per candidate

    score = similarity + reward * tanh(step reward) + outcome * outcome_value
            + novelty * 1 / (1 + times this session took the candidate's action)

(EMPO²'s count-based novelty: an action the session has not tried counts fully, one tried once half), then
maximal marginal relevance over the scored candidates when `diversity` > 0. The weights are a named profile
("stable": imitate what worked; "exploratory": favour what the session has not done, spread the results)
that a request may override term by term.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from evoskill.core.errors import InvalidInput
from evoskill.memory.v1 import memory_pb2


@dataclass(frozen=True)
class Situation:
    """Where a hint is asked for: the task (environment spec and seed) and the state as memories store it
    (core/state_text.state_text's goal and state)."""

    env_spec: str
    seed: int
    goal: str
    state: str

    def holds(self, experience: memory_pb2.Experience) -> bool:
        """`experience` was taken here: this task, this goal, this state."""
        return (experience.env_spec == self.env_spec and experience.HasField("seed") and experience.seed == self.seed
                and experience.goal == self.goal and experience.state == self.state)


class Weights(BaseModel):
    """The second stage's weights (similarity's is 1) and MMR's diversity."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    reward: float = Field(0.0, description="Weight of tanh(step reward)")
    outcome: float = Field(0.0, description="Weight of the episode's outcome (won 1, pending 0, lost -1 .. 0)")
    novelty: float = Field(0.0, description="Weight of 1 / (1 + times this session took the action)")
    diversity: float = Field(0.0, ge=0.0, le=1.0, description="MMR trade-off: 0 = score order, 1 = spread only")


PROFILES: dict[str, Weights] = {
    "stable": Weights(reward=0.3, outcome=0.5),
    "exploratory": Weights(reward=0.1, outcome=0.1, novelty=1.0, diversity=0.5),
}


def weights_for(profiles: dict[str, Weights], profile: str, **overrides: float | None) -> Weights:
    """The named profile with the request's set weights (None = the profile's)."""
    if profile not in profiles:
        raise InvalidInput(f"unknown memory profile {profile!r}; known: {', '.join(sorted(profiles))}")
    base = profiles[profile]
    update = {name: value for name, value in overrides.items() if value is not None}
    try:
        return Weights(**{**base.model_dump(), **update})
    except ValueError as exc:
        raise InvalidInput(f"retrieval weights: {exc}") from exc


def novelty_penalties(taken_actions: Sequence[str]) -> list[tuple[float, list[str]]]:
    """Actions the session took, grouped by how often, each group with what it loses of a full novelty:
    1 - 1/(1 + count). Disjoint groups, so one condition per group adds up to the exact novelty."""
    counts = Counter(a for a in taken_actions if a)
    groups: dict[int, list[str]] = {}
    for action, count in counts.items():
        groups.setdefault(count, []).append(action)
    return [(1.0 - 1.0 / (1 + count), sorted(actions)) for count, actions in sorted(groups.items())]


@dataclass(frozen=True)
class Retrieval:
    goal: str
    state: str
    limit: int
    recall: int
    weights: Weights = field(default_factory=Weights)
    taken_actions: tuple[str, ...] = ()
    env_spec: str = ""
    env_family: str = ""
    template: str = ""
    outcomes: tuple[str, ...] = ()  # payload names ("won", "lost", "pending"); empty = every outcome
    alternatives: bool = False  # only other actions than taken_actions, with an acceptable outcome
    cold_fill: bool = False  # fewer hot results than `limit`: the rest from the cold tier's summaries
    seed: int | None = None  # with env_spec: this task's own memories of this very state come first

    def __post_init__(self) -> None:
        if not self.goal and not self.state:
            raise InvalidInput("goal and state are both empty: nothing to retrieve by")
        if self.limit < 1 or self.recall < 1:
            raise InvalidInput(f"limit and recall must be >= 1, got {self.limit} and {self.recall}")
        if self.seed is not None and not self.env_spec:
            raise InvalidInput("seed names a task only with env_spec: set env_spec too")

    @property
    def situation(self) -> Situation | None:
        """The task and state whose own memories come first (`seed` set), else None."""
        return None if self.seed is None else Situation(self.env_spec, self.seed, self.goal, self.state)

    @property
    def candidates(self) -> int:
        """First-stage candidates: never fewer than the results asked for."""
        return max(self.recall, self.limit)
