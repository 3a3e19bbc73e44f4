"""The one rollout of the search: how a leaf is valued by playing on from it at random.

The search model (`core.search.model`) asks for rollouts (depth, seed, discount) and mixes their return
into leaf values; the sandbox runs this function next to the environment, so that a batch of leaves costs
one call rather than one per rollout step. Torch- and numba-free: sandbox workers import it.

Policy: uniform over the valid actions that may change the world (reading actions cannot move a rollout
towards anything; all of them when nothing else is left). Return: the discounted sum of the environment's
step reward (its score gain), +1 for a win and -1 for a loss.
"""

from __future__ import annotations

import random

from evoskill.envs.base import TextEnv

# Actions that only read the world: rollouts skip them, read-only sandboxes allow nothing else.
READ_ONLY_TEMPLATES = frozenset({"look", "look around", "inventory", "examine X", "look at X", "read X", "task"})


def rollout(env: TextEnv, depth: int, gamma: float, seed: int) -> tuple[float, list[str]]:
    """At most `depth` steps from where `env` stands; returns (discounted return, actions taken)."""
    rng = random.Random(seed)
    total, discount, taken = 0.0, 1.0, []
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
        total += discount * (reward + (1.0 if env.won else 0.0) - (1.0 if env.lost else 0.0))
        discount *= gamma
    return total, taken
