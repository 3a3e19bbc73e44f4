"""Gumbel MuZero's improved policy at one node (JIT kernels), after mctx's `qtransform_completed_by_mix_value`.

- completed Q: Q(s,a) = r + gamma * V(child) where N(s,a) > 0; elsewhere the mixed value
  v_mix = (v + N * sum_visited pi(a) Q(s,a) / sum_visited pi(a)) / (1 + N), with v the node's own evaluation
  and N = sum_a N(s,a) (Danihelka et al. 2022, appendix D): unvisited actions are worth what the node is.
- sigma(q) = (c_visit + max_a N(s,a)) * c_scale * (q - min q) / (max q - min q), min and max over the node's
  completed Q: a monotone map that grows with the evidence, independent of the reward scale.
- improved policy: softmax(log pi + sigma(completed Q)).
- non-root selection: argmax_a pi'(a) - N(s,a) / (1 + sum_b N(s,b)), deterministic, so that visit counts
  follow the improved policy; in-flight visits of the batch count in N.

Arrays run over the node's edges in storage order (by prior, highest first): ties go to the higher prior.
"""

from __future__ import annotations

import numpy as np

from evoskill.core.search.expand import softmax
from evoskill.core.search.jit import jit
from evoskill.core.search.puct import P_C_SCALE, P_C_VISIT, P_GAMMA, node_value
from evoskill.core.search.tree import (
    EDGE_CHILD,
    EDGE_PRIOR,
    EDGE_REWARD,
    EDGE_VIRTUAL,
    EDGE_VISITS,
    NO_CHILD,
    NODE_FIRST_EDGE,
    NODE_NUM_EDGES,
    NODE_RAW_VALUE,
)

TINY_PRIOR = 1e-30  # floor of a prior before its log: a prior that underflowed stays a (bad) candidate
MIN_Q_RANGE = 1e-8  # mctx's epsilon: equal completed Q values all map to 0


@jit
def completed_q(node_int: np.ndarray, node_float: np.ndarray, edge_int: np.ndarray, edge_float: np.ndarray,
                gamma: float, node: int) -> np.ndarray:
    """Q(s,a) of the node's edges, the mixed value where an edge is unvisited."""
    first, num = node_int[NODE_FIRST_EDGE, node], node_int[NODE_NUM_EDGES, node]
    q = np.zeros(num)
    visited = np.zeros(num, np.bool_)
    total, weight, weighted_q = 0, 0.0, 0.0
    for k in range(num):
        edge = first + k
        visits, child = edge_int[EDGE_VISITS, edge], edge_int[EDGE_CHILD, edge]
        if visits > 0 and child != NO_CHILD:
            q[k] = edge_float[EDGE_REWARD, edge] + gamma * node_value(node_int, node_float, child)
            visited[k] = True
            prior = max(edge_float[EDGE_PRIOR, edge], TINY_PRIOR)
            total += visits
            weight += prior
            weighted_q += prior * q[k]
    mixed = node_float[NODE_RAW_VALUE, node]
    if total > 0:
        mixed = (mixed + total * weighted_q / weight) / (total + 1)
    for k in range(num):
        if not visited[k]:
            q[k] = mixed
    return q


@jit
def sigma(q: np.ndarray, max_visits: int, c_visit: float, c_scale: float) -> np.ndarray:
    low, high = q.min(), q.max()
    return (c_visit + max_visits) * c_scale * (q - low) / max(high - low, MIN_Q_RANGE)


@jit
def improved_logits(node_int: np.ndarray, node_float: np.ndarray, edge_int: np.ndarray, edge_float: np.ndarray,
                    params: np.ndarray, node: int) -> np.ndarray:
    """log pi + sigma(completed Q) over the node's edges; its softmax is the improved policy."""
    first, num = node_int[NODE_FIRST_EDGE, node], node_int[NODE_NUM_EDGES, node]
    q = completed_q(node_int, node_float, edge_int, edge_float, params[P_GAMMA], node)
    max_visits = edge_int[EDGE_VISITS, first : first + num].max()
    logits = np.log(np.maximum(edge_float[EDGE_PRIOR, first : first + num], TINY_PRIOR))
    return logits + sigma(q, max_visits, params[P_C_VISIT], params[P_C_SCALE])


@jit
def select_interior_edge(node_int: np.ndarray, node_float: np.ndarray, edge_int: np.ndarray, edge_float: np.ndarray,
                         params: np.ndarray, node: int) -> int:
    """The edge Gumbel MuZero's deterministic rule picks at a non-root `node` (which must have edges)."""
    first, num = node_int[NODE_FIRST_EDGE, node], node_int[NODE_NUM_EDGES, node]
    policy = softmax(improved_logits(node_int, node_float, edge_int, edge_float, params, node))
    visits = (edge_int[EDGE_VISITS, first : first + num] + edge_int[EDGE_VIRTUAL, first : first + num]).astype(
        np.float64
    )
    return first + int(np.argmax(policy - visits / (1.0 + visits.sum())))
