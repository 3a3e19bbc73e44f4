"""Selection: walk from the root by PUCT or Gumbel MuZero's rule until a leaf, for a batch of leaves (a JIT kernel)."""

from __future__ import annotations

import numpy as np

from evoskill.core.search.improved import select_interior_edge
from evoskill.core.search.jit import jit
from evoskill.core.search.puct import P_MAX_DEPTH, select_edge
from evoskill.core.search.tree import (
    EDGE_ACTION,
    EDGE_CHILD,
    EDGE_VIRTUAL,
    NO_CHILD,
    NODE_TERMINAL,
    NODE_VIRTUAL,
)

# Leaf kinds.
LEAF_NEW_EDGE = 0  # an edge never stepped: the caller steps the environment
LEAF_TERMINAL = 1  # a terminal node: value 0, nothing to evaluate
LEAF_DEPTH_LIMIT = 2  # max_depth reached on an expanded node: back up its current value
LEAF_TRANSPOSITION = 3  # set by the caller: the new edge led to an existing node
LEAF_CYCLE = 4  # the walk re-entered a node of its own path (a transposition cycle): back up its value

# Rows of the per-batch leaf table (int64 [LEAF_FIELDS, batch_size]).
LEAF_KIND = 0
LEAF_PARENT = 1  # node the new edge leaves (LEAF_NEW_EDGE)
LEAF_ACTION = 2  # action of the new edge (LEAF_NEW_EDGE)
LEAF_NODE = 3  # the leaf node; for a new edge the caller fills it in once stepped
LEAF_DEPTH = 4  # path length in edges
LEAF_FIELDS = 5


@jit
def on_path(path_nodes: np.ndarray, leaf: int, depth: int, node: int) -> bool:
    for d in range(depth):  # noqa: SIM110 - numba compiles loops, not generators
        if path_nodes[leaf, d] == node:
            return True
    return False


@jit
def collect_leaves(
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
    root_edges: np.ndarray,
) -> int:
    """Select up to `num_leaves` leaves under virtual loss; returns how many were taken.

    Empty `root_edges`: PUCT at every node. Otherwise Gumbel MuZero (`core.search.gumbel`): leaf i leaves
    the root by root_edges[i], which the root's sequential halving chose, then follows the deterministic
    non-root rule (`core.search.improved`).

    Leaf i's path is path_nodes[i, :L] / path_edges[i, :L] with L = leaves[LEAF_DEPTH, i] (edge d
    leaves node d). A walk that comes back to a node of its own path (go north, go south) stops
    there: otherwise one simulation could go round the cycle up to max_depth times. Virtual loss is
    added along each accepted path and removed by `backup_leaves`. The batch ends early when
    selection returns to an edge already pending in this batch: stepping it twice would waste an
    environment step, so that leaf waits for the next batch.
    """
    max_depth = int(params[P_MAX_DEPTH])
    for i in range(num_leaves):
        node = 0
        depth = 0
        kind = LEAF_DEPTH_LIMIT
        while True:
            if node_int[NODE_TERMINAL, node] != 0:
                kind = LEAF_TERMINAL
                break
            if depth >= max_depth:
                kind = LEAF_DEPTH_LIMIT
                break
            if len(root_edges) == 0:
                edge = select_edge(node_int, node_float, edge_int, edge_float, q_bounds, params, node)
            elif depth == 0:
                edge = root_edges[i]
            else:
                edge = select_interior_edge(node_int, node_float, edge_int, edge_float, params, node)
            path_nodes[i, depth] = node
            path_edges[i, depth] = edge
            depth += 1
            child = edge_int[EDGE_CHILD, edge]
            if child == NO_CHILD:
                kind = LEAF_NEW_EDGE
                break
            node = child
            if on_path(path_nodes, i, depth, node):
                kind = LEAF_CYCLE
                break
        if kind == LEAF_NEW_EDGE:
            edge = path_edges[i, depth - 1]
            if edge_int[EDGE_VIRTUAL, edge] > 0:
                return i
            leaves[LEAF_PARENT, i] = node
            leaves[LEAF_ACTION, i] = edge_int[EDGE_ACTION, edge]
            leaves[LEAF_NODE, i] = NO_CHILD
        else:
            leaves[LEAF_NODE, i] = node
            node_int[NODE_VIRTUAL, node] += 1
        leaves[LEAF_KIND, i] = kind
        leaves[LEAF_DEPTH, i] = depth
        for d in range(depth):
            edge_int[EDGE_VIRTUAL, path_edges[i, d]] += 1
            node_int[NODE_VIRTUAL, path_nodes[i, d]] += 1
    return num_leaves
