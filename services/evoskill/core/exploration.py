"""Exploration on top of any agent (seed 004 §4, seed 000 §5.3), each switch off by default and recorded per step.

- ε-greedy (`search.explore_epsilon`): `EpsilonGreedy` wraps an agent; at each real step, with probability ε,
  a uniformly random candidate of the state replaces the agent's choice. The draw is seeded by the step's
  seed, so a replayed episode explores where it explored.
- Count-based novelty (`search.novelty_weight`): `novelty_bonus` gives each candidate weight/(count+1) of logit,
  count = the episode's visits to where it leads (or, unstepped, the times it was taken there): θ alone adds
  it to its logits, search to the root's priors (core/search/advice.py).
- Uncertainty (`search.entropy_trigger`): policy+mcts searches only where θ is unsure (planner/agents.py), and
  with `search.stall_trigger` also where the episode has gone that many steps without its score rising.
- Curiosity from learned dynamics (`search.curiosity_weight`): search adds weight × the surprise of θ's dynamics
  model to a stepped edge's reward (core/search/model.py); `curiosity_changed` says when that chose the action.

`Decision.exploration` names why a step's action was exploratory (EXPLORATIONS); the runner writes it into the
step's record (`EpisodeStep.exploration`), so monitoring and the ablations count what was explored, not what
was configured.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from evoskill.core.agent import Agent, Decision, Step

EPSILON = "epsilon"  # a random candidate replaced the agent's choice
NOVELTY = "novelty"  # the novelty bonus changed the choice
UNCERTAIN = "uncertain"  # the step was searched because θ was unsure (entropy trigger)
STALLED = "stalled"  # the step was searched, θ sure or not, because the episode's score had stopped rising
CURIOSITY = "curiosity"  # the dynamics model's surprise bonus changed the search's choice
EXPLORATIONS = (EPSILON, NOVELTY, UNCERTAIN, STALLED, CURIOSITY)


def novelty_bonus(counts: np.ndarray, weight: float) -> np.ndarray:
    """weight / (count + 1) per candidate: a bounded bonus for the less tried (EMPO²'s 1/(n+1))."""
    return weight / (np.asarray(counts, dtype=np.float64) + 1.0)


def curiosity_changed(q_values: np.ndarray, bonuses: np.ndarray, chosen: int) -> bool:
    """The chosen root action leads by Q with its edge's curiosity bonus (`bonuses`: weight × surprise per root
    action) and another visited one would lead without it. Q(root, a) counts that bonus once, undiscounted;
    deeper bonuses are left in (a first-order test, no second search)."""
    q = np.asarray(q_values, dtype=np.float64)
    visited = np.isfinite(q)
    if visited.sum() < 2 or not visited[chosen] or q[chosen] < q[visited].max():
        return False
    plain = np.where(visited, q - np.asarray(bonuses, dtype=np.float64), -np.inf)
    return bool(plain.max() > plain[chosen])


def explores(seed: int, epsilon: float) -> random.Random | None:
    """The step's generator when it explores (probability `epsilon`, drawn from the step's seed), else None."""
    rng = random.Random(f"explore-{seed}")
    return rng if epsilon > 0 and rng.random() < epsilon else None


@dataclass
class EpsilonGreedy:
    """`inner`'s decision, except with probability `epsilon` a uniformly random candidate of the state (the
    decision's target lists the candidates the agent chose among). The step's target stays the agent's, so the
    learner is still taught what the agent found; only the action acted on changes."""

    inner: Agent
    epsilon: float

    def act(self, step: Step) -> Decision | None:
        decision = self.inner.act(step)
        if decision is None:
            return None
        rng = explores(step.seed, self.epsilon)
        candidates = list(decision.target.actions) or list(step.observation.valid_actions)
        if rng is None or len(candidates) < 2 or decision.stepped is not None:  # stepped: already acted for real
            return decision
        decision.action, decision.exploration = candidates[rng.randrange(len(candidates))], EPSILON
        return decision


__all__ = ["CURIOSITY", "EPSILON", "EXPLORATIONS", "NOVELTY", "STALLED", "UNCERTAIN", "EpsilonGreedy",
           "curiosity_changed", "explores", "novelty_bonus"]
