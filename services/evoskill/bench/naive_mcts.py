"""The reference point: MCTS written the straightforward way, one Python object per node.

This follows seed 000 §3.2's `MCTSNode` sketch (state, parent, children dict, visit_count,
total_value, prior_prob) with PUCT instead of UCT, and computes exactly what evoskill's core
computes with `normalize_q=False, unvisited_q=0.0`, no noise, no transpositions:
score = Q + c * P * sqrt(N(parent)) / (1 + N), Q = r + gamma * mean value (0 when unvisited).
Children are created on expansion with their prior; their state is stepped on first visit, so
every implementation takes one environment step per simulation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from evoskill.core.search.types import Transition

EvaluateOne = Callable[[Any], tuple[np.ndarray, float]]  # state -> (prior logits, value)


class MCTSNode:
    def __init__(self, state: Any, parent: MCTSNode | None = None, prior_prob: float = 0.0) -> None:
        self.state = state  # None until the edge into this node is stepped
        self.parent = parent
        self.children: dict[int, MCTSNode] = {}  # action -> MCTSNode
        self.visit_count = 0
        self.total_value = 0.0
        self.prior_prob = prior_prob
        self.reward = 0.0
        self.terminal = False

    def value(self) -> float:
        return self.total_value / self.visit_count if self.visit_count else 0.0

    def puct_score(self, c_puct: float, gamma: float) -> float:
        assert self.parent is not None
        q = self.reward + gamma * self.value() if self.visit_count else 0.0
        return q + c_puct * self.prior_prob * math.sqrt(self.parent.visit_count) / (1 + self.visit_count)

    def is_expanded(self) -> bool:
        return bool(self.children)

    def select_child(self, c_puct: float, gamma: float) -> tuple[int, MCTSNode]:
        return max(self.children.items(), key=lambda item: item[1].puct_score(c_puct, gamma))

    def expand(self, logits: np.ndarray) -> None:
        priors = np.exp(logits - logits.max())
        priors /= priors.sum()
        for action, prior in enumerate(priors):
            self.children[action] = MCTSNode(None, self, float(prior))


def naive_search(
    root_state: Any,
    step: Callable[[Any, int], Transition],
    evaluate_one: EvaluateOne,
    num_simulations: int,
    c_puct: float = 1.25,
    gamma: float = 1.0,
) -> MCTSNode:
    root = MCTSNode(root_state)
    logits, value = evaluate_one(root_state)
    root.expand(logits)
    root.visit_count, root.total_value = 1, value
    for _ in range(num_simulations):
        node = root
        path = [root]
        action = -1
        while node.is_expanded():
            action, node = node.select_child(c_puct, gamma)
            path.append(node)
            if node.state is None:
                break
        if node.state is None:  # step the new edge, then evaluate the new state
            parent = node.parent
            assert parent is not None
            transition = step(parent.state, action)
            node.state, node.reward = transition.state, transition.reward
            node.terminal = transition.done or transition.num_actions <= 0
            if node.terminal:
                value = 0.0
            else:
                logits, value = evaluate_one(node.state)
                node.expand(logits)
        else:  # a terminal node reached again
            value = 0.0
        for visited in reversed(path):
            visited.visit_count += 1
            visited.total_value += value
            value = visited.reward + gamma * value
    return root


def root_visits(root: MCTSNode) -> np.ndarray:
    return np.array([root.children[a].visit_count for a in sorted(root.children)], np.int64)
