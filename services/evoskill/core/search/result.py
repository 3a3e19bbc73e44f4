"""What a search returns: the root's statistics, θ's target where Gumbel gave one, and the tree, with the helpers
the real step and the learner read (the preference order, the losers left out)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from evoskill.core.search.tree import Tree
from evoskill.core.search.types import SearchStats


@dataclass(frozen=True)
class SearchResult:
    action: int  # most visited root action (ties: higher prior)
    visit_counts: np.ndarray  # int64 per root action
    q_values: np.ndarray  # Q(root, a) per action, NaN where unvisited
    priors: np.ndarray  # root priors the search used (noise included)
    root_value: float  # mean backed-up value of the root
    stats: SearchStats
    tree: Tree  # every node's statistics, e.g. for training targets
    states: list[Any]  # states[n] is node n's state
    # θ's policy target by root action: Gumbel MuZero's improved policy; None (PUCT): the visit distribution
    policy_target: np.ndarray | None = None

    @property
    def visit_distribution(self) -> np.ndarray:
        total = self.visit_counts.sum()
        return self.visit_counts / total if total else self.visit_counts.astype(np.float64)

    def principal_variation(self) -> list[int]:
        return self.tree.principal_variation(0)

    def preference(self) -> list[int]:
        """The root actions, the chosen one first, then by the policy target (Gumbel's) or visits, ties by prior."""
        rank = self.visit_counts if self.policy_target is None else self.policy_target
        rest = sorted((a for a in range(len(self.priors)) if a != self.action),
                      key=lambda a: (-float(rank[a]), -float(self.priors[a]), a))
        return [self.action, *rest] if self.action >= 0 else rest

    def without(self, dropped: np.ndarray, action: int) -> SearchResult:
        """This result with the root actions `dropped` marks given no visits and no share of the policy target,
        and `action` chosen: what the learner reads once the step has ruled those out."""
        target = self.policy_target
        if target is not None:
            kept = np.where(dropped, 0.0, target)
            target = kept / kept.sum() if kept.sum() > 0 else None
        return replace(self, action=action, visit_counts=np.where(dropped, 0, self.visit_counts),
                       policy_target=target)
