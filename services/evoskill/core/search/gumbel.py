"""Gumbel MuZero at the root (Danihelka et al. 2022, "Policy improvement by planning with Gumbel"; mctx's
`gumbel_muzero_policy`): `search(..., SearchConfig(algorithm="gumbel"))` runs it over the same tree,
kernels and callables as PUCT.

- Gumbel-top-k: g(a) ~ Gumbel(0, 1) per root action; the m = min(gumbel_max_actions, A) actions with the
  highest g + log pi are sampled without replacement (they are the first visited: unvisited actions all
  have the same completed Q).
- Sequential halving: the budget goes in phases; each gives every action still considered the same
  number of visits, then keeps the better half by g + log pi + sigma(completed Q) (`considered_visits`).
- Below the root: the deterministic rule of `core.search.improved`.
- Outputs: the action (among the most visited, the highest g + log pi + sigma) and the improved policy
  softmax(log pi + sigma(completed Q)) over ALL root actions, θ's training target (`policy_target`): with
  2-16 simulations it already leans on what search found, where visit counts over 25-45 actions are flat.

Batching: in one level of a phase every considered action gets one visit whatever the values, and their
subtrees are disjoint (but for transpositions), so a level's descents form one round: one `step_batch`, one
`evaluate`. A level's actions are ranked once, at its start (mctx ranks before each simulation; the two
differ only where sigma's scale moves mid-level and reorders two actions of equal visits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evoskill.core.search.expand import softmax
from evoskill.core.search.improved import improved_logits
from evoskill.core.search.tree import Tree
from evoskill.core.search_config import SearchConfig


def considered_visits(max_considered: int, num_simulations: int) -> np.ndarray:
    """Per simulation, the visit count an action must have to be visited next (mctx's sequence).

    A phase visits each of the `considered` actions max(1, floor(n / (ceil(log2 m) * considered))) times,
    then halves them (never below 2). With m = 1 one action takes every simulation.
    """
    if max_considered <= 1:
        return np.arange(num_simulations)
    phases = math.ceil(math.log2(max_considered))
    sequence: list[int] = []
    visits = 0
    considered = max_considered
    while len(sequence) < num_simulations:
        for _ in range(max(1, num_simulations // (phases * considered))):
            sequence.extend([visits] * considered)
            visits += 1
        considered = max(2, considered // 2)
    return np.array(sequence[:num_simulations], np.int64)


@dataclass(frozen=True)
class GumbelRoot:
    """The root's Gumbel noise and halving schedule; arrays run over the root's edges in storage order."""

    gumbel: np.ndarray
    schedule: np.ndarray  # considered_visits(m, budget)
    params: np.ndarray  # the kernels' parameters (puct.kernel_params)

    @classmethod
    def start(cls, tree: Tree, config: SearchConfig, params: np.ndarray, rng: np.random.Generator) -> GumbelRoot:
        """Call once the root is expanded (its edges and priors are in `tree`)."""
        num = int(tree.node_num_edges[0])
        schedule = considered_visits(min(config.gumbel_max_actions, num), config.num_simulations)
        return cls(config.gumbel_scale * rng.gumbel(size=num), schedule, params)

    def _edges(self, tree: Tree) -> tuple[int, np.ndarray]:
        first, num = int(tree.node_first_edge[0]), int(tree.node_num_edges[0])
        return first, tree.edge_visits[first : first + num]

    def _logits(self, tree: Tree) -> np.ndarray:
        return np.asarray(improved_logits(*tree.arrays[:4], self.params, 0))

    def next_round(self, tree: Tree, simulation: int) -> np.ndarray:
        """The root edges of the next round: the rest of the current level, best first."""
        level = self.schedule[simulation]
        count = int(np.argmax(self.schedule[simulation:] != level)) or len(self.schedule) - simulation
        first, visits = self._edges(tree)
        candidates = np.flatnonzero(visits == level)
        if not len(candidates):  # cannot happen with the schedule; never leaves a round empty
            candidates = np.flatnonzero(visits == visits.min())
        score = self.gumbel[candidates] + self._logits(tree)[candidates]
        best = candidates[np.argsort(-score, kind="stable")][:count]
        return (first + best).astype(np.int64)

    def decide(self, tree: Tree) -> tuple[int, np.ndarray]:
        """(action, improved policy by action) once the budget is spent."""
        first, visits = self._edges(tree)
        logits = self._logits(tree)
        score = np.where(visits == visits.max(), self.gumbel + logits, -np.inf)
        edges = first + np.arange(len(visits))
        policy = np.zeros(len(visits))
        policy[tree.edge_action[edges]] = softmax(logits)
        return int(tree.edge_action[first + int(np.argmax(score))]), policy
