"""Backup: discounted returns from the leaves to the root, undoing virtual loss (a JIT kernel)."""

from __future__ import annotations

import numpy as np

from evoskill.core.search.descend import (
    LEAF_DEPTH,
    LEAF_KIND,
    LEAF_NEW_EDGE,
    LEAF_NODE,
    LEAF_TERMINAL,
    LEAF_TRANSPOSITION,
)
from evoskill.core.search.expand import expand_nodes
from evoskill.core.search.jit import jit
from evoskill.core.search.puct import P_GAMMA, node_value
from evoskill.core.search.tree import (
    EDGE_CHILD,
    EDGE_REWARD,
    EDGE_VIRTUAL,
    EDGE_VISITS,
    NODE_DEPTH,
    NODE_RAW_VALUE,
    NODE_VALUE_SUM,
    NODE_VIRTUAL,
    NODE_VISITS,
)


@jit
def backup_leaves(
    node_int: np.ndarray,
    node_float: np.ndarray,
    edge_int: np.ndarray,
    edge_float: np.ndarray,
    q_bounds: np.ndarray,
    params: np.ndarray,
    num_leaves: int,
    path_nodes: np.ndarray,
    path_edges: np.ndarray,
    leaves: np.ndarray,
    leaf_reward: np.ndarray,
) -> int:
    """Back up each leaf, in order; returns the deepest path length.

    The leaf's value is the new node's evaluation (0 if terminal), or, for transposition hits and
    for walks stopped on an expanded node (max depth, cycle), the node's current mean value.
    Walking up, G <- r + gamma * G: each edge gains a visit, each node on the path a visit and G.
    A just-stepped edge gets its child and reward here; a walk that stopped on an existing node
    carried virtual loss on that node too.
    """
    gamma = params[P_GAMMA]
    deepest = 0
    for i in range(num_leaves):
        kind = leaves[LEAF_KIND, i]
        length = leaves[LEAF_DEPTH, i]
        leaf = leaves[LEAF_NODE, i]
        deepest = max(deepest, length)
        if kind in (LEAF_NEW_EDGE, LEAF_TRANSPOSITION):
            edge = path_edges[i, length - 1]
            edge_int[EDGE_CHILD, edge] = leaf
            edge_float[EDGE_REWARD, edge] = leaf_reward[i]
        else:
            node_int[NODE_VIRTUAL, leaf] -= 1
        if kind in (LEAF_NEW_EDGE, LEAF_TERMINAL):
            g = node_float[NODE_RAW_VALUE, leaf]
        else:
            g = node_value(node_int, node_float, leaf)
        node_int[NODE_VISITS, leaf] += 1
        node_float[NODE_VALUE_SUM, leaf] += g
        for d in range(length - 1, -1, -1):
            edge = path_edges[i, d]
            node = path_nodes[i, d]
            g = edge_float[EDGE_REWARD, edge] + gamma * g
            edge_int[EDGE_VISITS, edge] += 1
            edge_int[EDGE_VIRTUAL, edge] -= 1
            node_int[NODE_VISITS, node] += 1
            node_int[NODE_VIRTUAL, node] -= 1
            node_float[NODE_VALUE_SUM, node] += g
            q = edge_float[EDGE_REWARD, edge] + gamma * node_value(node_int, node_float, edge_int[EDGE_CHILD, edge])
            q_bounds[0] = min(q_bounds[0], q)
            q_bounds[1] = max(q_bounds[1], q)
    return deepest


@jit
def expand_and_backup(
    node_int: np.ndarray,
    node_float: np.ndarray,
    edge_int: np.ndarray,
    edge_float: np.ndarray,
    q_bounds: np.ndarray,
    params: np.ndarray,
    first_node: int,
    first_edge: int,
    num_new: int,
    new_num_actions: np.ndarray,
    new_template_start: np.ndarray,
    templates: np.ndarray,
    logits: np.ndarray,
    logits_start: np.ndarray,
    logits_width: int,
    values: np.ndarray,
    num_leaves: int,
    path_nodes: np.ndarray,
    path_edges: np.ndarray,
    leaves: np.ndarray,
    leaf_reward: np.ndarray,
) -> tuple[int, int]:
    """Expansion then backup, one call per batch; returns (edges used, deepest path)."""
    edges = expand_nodes(
        node_int, node_float, edge_int, edge_float, first_node, first_edge, num_new, new_num_actions,
        new_template_start, templates, logits, logits_start, logits_width, values, np.zeros(0), 0.0,
    )  # fmt: skip
    for i in range(num_leaves):
        if leaves[LEAF_KIND, i] == LEAF_NEW_EDGE:
            node_int[NODE_DEPTH, leaves[LEAF_NODE, i]] = leaves[LEAF_DEPTH, i]
    deepest = backup_leaves(
        node_int, node_float, edge_int, edge_float, q_bounds, params, num_leaves,
        path_nodes, path_edges, leaves, leaf_reward,
    )  # fmt: skip
    return edges, deepest


@jit
def top_two_visits(edge_int: np.ndarray, first: int, num: int) -> tuple[int, int]:
    """The largest and second largest visit counts among edges first..first+num."""
    top = 0
    second = 0
    for edge in range(first, first + num):
        n = edge_int[EDGE_VISITS, edge]
        if n > top:
            second = top
            top = n
        elif n > second:
            second = n
    return top, second
