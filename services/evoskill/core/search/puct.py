"""PUCT action selection at one node (a JIT kernel).

score(s,a) = Q(s,a) + c_puct * P(s,a) * sqrt(N(s)) / (1 + N(s,a))

- Q(s,a) = r(s,a) + gamma * V(child); unvisited edges get the parent's value or a constant;
  optionally min-max normalised over the search (see `SearchConfig.normalize_q`).
- In-flight visits of the current batch (virtual loss) count in N and return -virtual_loss each
  (in the units PUCT sees, i.e. after normalisation), so the batch's next leaf prefers another path.
- Progressive widening: only the first ceil(k * N(s)^alpha) edges (capped by max_children) compete;
  edges are stored by prior, highest first, so these are the most promising ones.
- Template-first: where edges carry templates, pick a template by PUCT over its actions' summed
  prior, visits and visit-weighted Q, then an action inside it with the prior renormalised.
Ties go to the earlier edge, i.e. the higher prior.
"""

from __future__ import annotations

import math

import numpy as np

from evoskill.core.search.jit import jit
from evoskill.core.search.tree import (
    EDGE_CHILD,
    EDGE_PRIOR,
    EDGE_REWARD,
    EDGE_TEMPLATE,
    EDGE_VIRTUAL,
    EDGE_VISITS,
    NODE_FIRST_EDGE,
    NODE_NUM_EDGES,
    NODE_RAW_VALUE,
    NODE_TEMPLATED,
    NODE_VALUE_SUM,
    NODE_VIRTUAL,
    NODE_VISITS,
)
from evoskill.core.search_config import SearchConfig

# `SearchConfig` flattened into one float64 array for the kernels (flags are 0/1).
P_C_PUCT = 0
P_GAMMA = 1
P_UNVISITED_PARENT = 2
P_UNVISITED_VALUE = 3
P_NORMALIZE_Q = 4
P_VIRTUAL_LOSS = 5
P_WIDENING_K = 6  # <= 0: no widening
P_WIDENING_ALPHA = 7
P_MAX_CHILDREN = 8  # <= 0: no cap
P_HIERARCHICAL = 9
P_MAX_DEPTH = 10
P_C_VISIT = 11  # Gumbel MuZero's sigma (core/search/improved.py)
P_C_SCALE = 12
NUM_PARAMS = 13


def kernel_params(config: SearchConfig) -> np.ndarray:
    params = np.zeros(NUM_PARAMS)
    parent = isinstance(config.unvisited_q, str)
    params[P_C_PUCT] = config.c_puct
    params[P_GAMMA] = config.gamma
    params[P_UNVISITED_PARENT] = parent
    params[P_UNVISITED_VALUE] = 0.0 if isinstance(config.unvisited_q, str) else config.unvisited_q
    params[P_NORMALIZE_Q] = config.normalize_q
    params[P_VIRTUAL_LOSS] = config.virtual_loss
    params[P_WIDENING_K] = config.widening_k or 0.0
    params[P_WIDENING_ALPHA] = config.widening_alpha
    params[P_MAX_CHILDREN] = config.max_children or 0
    params[P_HIERARCHICAL] = config.hierarchical
    params[P_MAX_DEPTH] = config.max_depth
    params[P_C_VISIT] = config.gumbel_c_visit
    params[P_C_SCALE] = config.gumbel_c_scale
    return params


@jit
def node_value(node_int: np.ndarray, node_float: np.ndarray, node: int) -> float:
    """V(node): mean backed-up value, or the node's evaluation before any visit."""
    visits = node_int[NODE_VISITS, node]
    if visits == 0:
        return node_float[NODE_RAW_VALUE, node]
    return node_float[NODE_VALUE_SUM, node] / visits


@jit
def normalized(q_bounds: np.ndarray, params: np.ndarray, q: float) -> float:
    low, high = q_bounds[0], q_bounds[1]
    if params[P_NORMALIZE_Q] > 0.0 and high > low:
        return (q - low) / (high - low)
    return q


@jit
def widened(params: np.ndarray, num_edges: int, visits: int) -> int:
    """How many of the (prior-sorted) edges may compete at a node visited `visits` times."""
    limit = num_edges
    cap = int(params[P_MAX_CHILDREN])
    if cap > 0 and limit > cap:
        limit = cap
    k = params[P_WIDENING_K]
    if k > 0.0:
        allowed = math.ceil(k * visits ** params[P_WIDENING_ALPHA])
        limit = min(limit, max(allowed, 1))
    return limit


@jit
def select_template(
    node_int: np.ndarray,
    node_float: np.ndarray,
    edge_int: np.ndarray,
    edge_float: np.ndarray,
    q_bounds: np.ndarray,
    params: np.ndarray,
    first: int,
    num: int,
    parent_visits: int,
    unvisited_q: float,
) -> tuple[int, int, int, float]:
    """Pick a template run among a node's edges; returns (first edge, run length, visits, prior)."""
    c_puct, gamma, virtual_loss = params[P_C_PUCT], params[P_GAMMA], params[P_VIRTUAL_LOSS]
    sqrt_n = math.sqrt(parent_visits)
    best_score = -math.inf
    best = (first, num, parent_visits, 1.0)
    end = first + num
    start = first
    while start < end:
        template = edge_int[EDGE_TEMPLATE, start]
        stop = start
        visits = 0
        virtual = 0
        q_sum = 0.0
        prior = 0.0
        while stop < end and edge_int[EDGE_TEMPLATE, stop] == template:
            n = edge_int[EDGE_VISITS, stop]
            if n > 0:
                q = edge_float[EDGE_REWARD, stop] + gamma * node_value(node_int, node_float, edge_int[EDGE_CHILD, stop])
                q_sum += n * normalized(q_bounds, params, q)
                visits += n
            virtual += edge_int[EDGE_VIRTUAL, stop]
            prior += edge_float[EDGE_PRIOR, stop]
            stop += 1
        q = q_sum / visits if visits > 0 else unvisited_q
        if virtual > 0:
            q = (visits * q - virtual * virtual_loss) / (visits + virtual)
        score = q + c_puct * prior * sqrt_n / (1 + visits + virtual)
        if score > best_score:
            best_score = score
            best = (start, stop - start, visits + virtual, prior)
        start = stop
    return best


@jit
def select_edge(
    node_int: np.ndarray,
    node_float: np.ndarray,
    edge_int: np.ndarray,
    edge_float: np.ndarray,
    q_bounds: np.ndarray,
    params: np.ndarray,
    node: int,
) -> int:
    """The edge PUCT picks at `node` (which must have edges)."""
    c_puct, gamma, virtual_loss = params[P_C_PUCT], params[P_GAMMA], params[P_VIRTUAL_LOSS]
    first = node_int[NODE_FIRST_EDGE, node]
    num = node_int[NODE_NUM_EDGES, node]
    parent_visits = node_int[NODE_VISITS, node] + node_int[NODE_VIRTUAL, node]
    if params[P_UNVISITED_PARENT] > 0.0:
        unvisited_q = normalized(q_bounds, params, node_value(node_int, node_float, node))
    else:
        unvisited_q = normalized(q_bounds, params, params[P_UNVISITED_VALUE])
    prior_scale = 1.0
    if params[P_HIERARCHICAL] > 0.0 and node_int[NODE_TEMPLATED, node] != 0:
        first, num, parent_visits, template_prior = select_template(
            node_int, node_float, edge_int, edge_float, q_bounds, params, first, num, parent_visits, unvisited_q
        )
        if template_prior > 0.0:
            prior_scale = 1.0 / template_prior
    limit = widened(params, num, parent_visits)
    exploration = c_puct * prior_scale * math.sqrt(parent_visits)
    best_score = -math.inf
    best_edge = first
    for edge in range(first, first + limit):
        visits = edge_int[EDGE_VISITS, edge]
        virtual = edge_int[EDGE_VIRTUAL, edge]
        if visits > 0:
            child_value = node_value(node_int, node_float, edge_int[EDGE_CHILD, edge])
            q = normalized(q_bounds, params, edge_float[EDGE_REWARD, edge] + gamma * child_value)
        else:
            q = unvisited_q
        if virtual > 0:
            q = (visits * q - virtual * virtual_loss) / (visits + virtual)
        score = q + exploration * edge_float[EDGE_PRIOR, edge] / (1 + visits + virtual)
        if score > best_score:
            best_score = score
            best_edge = edge
    return best_edge
