"""The one rollout of the search: how a leaf is valued by playing on from it at random.

The search model (`core.search.model`) asks for rollouts (depth, seed, discount) and mixes their return
into leaf values; the sandbox runs this function next to the environment, so that a batch of leaves costs
one call rather than one per rollout step. Torch- and numba-free: sandbox workers import it.

Policy: uniform over the valid actions that may change the world (reading actions cannot move a rollout
towards anything; all of them when nothing else is left). Return, in the environment's units: the discounted
sum of its step reward (its score gain), +1 for a win and -1 for a loss; the outcome and the final score are
kept apart too, so that search can value the rollout in the reward service's units (`Scorer.rollout`).
"""

from __future__ import annotations

import random
from typing import NamedTuple

from evoskill.envs.base import TextEnv

# Actions that only read the world: rollouts skip them, read-only sandboxes allow nothing else.
READ_ONLY_TEMPLATES = frozenset({"look", "look around", "inventory", "examine X", "look at X", "read X", "task"})


class Rollout(NamedTuple):
    score_gain: float  # discounted sum of the environment's step rewards
    outcome: float  # discount of the step that won (> 0) or lost (< 0) the game; 0 if neither
    final_score: float  # the environment's score where the rollout stopped
    taken: list[str]

    @property
    def total(self) -> float:
        """The return in the environment's units: score gain, +1 for a win, -1 for a loss (discounted)."""
        return self.score_gain + self.outcome


def rollout(env: TextEnv, depth: int, gamma: float, seed: int) -> Rollout:
    """At most `depth` steps from where `env` stands."""
    rng = random.Random(seed)
    gain, outcome, discount, taken = 0.0, 0.0, 1.0, []
    for _ in range(depth):
        if env.done:
            break
        valid = env.valid_actions()
        if not valid:
            break
        valid = [a for a in valid if env.template(a) not in READ_ONLY_TEMPLATES] or valid
        action = valid[rng.randrange(len(valid))]
        _, reward = env.step(action)
        taken.append(action)
        gain += discount * reward
        outcome += discount * ((1.0 if env.won else 0.0) - (1.0 if env.lost else 0.0))
        discount *= gamma
    return Rollout(gain, outcome, env.score, taken)
