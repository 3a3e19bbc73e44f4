"""The search tree as flat arrays (structure of arrays, like mctx's `Tree`).

Nodes and edges live in separate arrays so that nodes can have any number of legal actions: the
edges of node n are `node_first_edge[n] : node_first_edge[n] + node_num_edges[n]`, sorted by prior,
highest first (grouped by template first for template-first expansion). Progressive widening then
only has to look at a prefix.

With transpositions the tree is a DAG: two edges may lead to the same child node. Node statistics
(N, value sum) are shared by every path into the node; edge statistics (N(s,a), reward) belong to
the edge. Q(s,a) = r(s,a) + gamma * V(child), with V the node's mean backed-up value (Monte-Carlo
graph search, Czech et al. 2021).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

NO_CHILD = -1

# Rows of the four field tables. The kernels take the tables, not one argument per field: numba
# pays ~0.1 µs per argument (and ~6 µs for a NamedTuple of arrays) on every call from Python.
# node_int
NODE_VISITS = 0  # completed visits through the node (its expansion counts as one)
NODE_VIRTUAL = 1  # in-flight visits of the current batch
NODE_FIRST_EDGE = 2
NODE_NUM_EDGES = 3
NODE_TERMINAL = 4  # 0/1
NODE_TEMPLATED = 5  # 0/1: edges carry template ids (template-first selection)
NODE_DEPTH = 6  # depth at creation, in edges from the root
NODE_INT_FIELDS = 7
# node_float
NODE_VALUE_SUM = 0  # sum of returns backed up through the node
NODE_RAW_VALUE = 1  # leaf evaluation (0 for terminal nodes)
NODE_FLOAT_FIELDS = 2
# edge_int
EDGE_ACTION = 0  # index in the parent's legal actions
EDGE_CHILD = 1  # child node; NO_CHILD until the edge is stepped
EDGE_VISITS = 2  # N(s,a)
EDGE_VIRTUAL = 3  # in-flight visits of the current batch
EDGE_TEMPLATE = 4
EDGE_INT_FIELDS = 5
# edge_float
EDGE_PRIOR = 0
EDGE_REWARD = 1  # r(s,a), known once stepped
EDGE_FLOAT_FIELDS = 2


class TreeArrays(NamedTuple):
    node_int: np.ndarray  # int64 [NODE_INT_FIELDS, node capacity]
    node_float: np.ndarray  # float64 [NODE_FLOAT_FIELDS, node capacity]
    edge_int: np.ndarray  # int64 [EDGE_INT_FIELDS, edge capacity]
    edge_float: np.ndarray  # float64 [EDGE_FLOAT_FIELDS, edge capacity]
    q_bounds: np.ndarray  # float64[2]: smallest and largest Q(s,a) seen, for normalisation


def _empty(num_nodes: int, num_edges: int) -> TreeArrays:
    edge_int = np.zeros((EDGE_INT_FIELDS, num_edges), np.int64)
    edge_int[EDGE_CHILD] = NO_CHILD
    return TreeArrays(
        node_int=np.zeros((NODE_INT_FIELDS, num_nodes), np.int64),
        node_float=np.zeros((NODE_FLOAT_FIELDS, num_nodes)),
        edge_int=edge_int,
        edge_float=np.zeros((EDGE_FLOAT_FIELDS, num_edges)),
        q_bounds=np.array([np.inf, -np.inf]),
    )


class _Row:
    """A named row of one of the field tables, read as a numpy view."""

    def __init__(self, table: str, row: int) -> None:
        self.table, self.row = table, row

    def __get__(self, tree: Tree, owner: object = None) -> np.ndarray:
        table: np.ndarray = getattr(tree.arrays, self.table)
        return table[self.row]


class Tree:
    """Growable field tables plus the counts of nodes and edges in use. Node 0 is the root.

    The properties are named views of the rows (e.g. `tree.edge_visits[e]`), for tests, results
    and the learner (training targets for every node); they cover the whole capacity.
    """

    def __init__(self, node_capacity: int = 256, edge_capacity: int = 4096) -> None:
        self.arrays = _empty(max(node_capacity, 1), max(edge_capacity, 1))
        self.num_nodes = 0
        self.num_edges = 0

    def reserve(self, nodes: int, edges: int) -> None:
        """Make room for `nodes` more nodes and `edges` more edges (capacity doubles)."""
        a = self.arrays
        node_cap, edge_cap = a.node_int.shape[1], a.edge_int.shape[1]
        need_nodes, need_edges = self.num_nodes + nodes, self.num_edges + edges
        if need_nodes <= node_cap and need_edges <= edge_cap:
            return
        while node_cap < need_nodes:
            node_cap *= 2
        while edge_cap < need_edges:
            edge_cap *= 2
        grown = _empty(node_cap, edge_cap)
        grown.node_int[:, : self.num_nodes] = a.node_int[:, : self.num_nodes]
        grown.node_float[:, : self.num_nodes] = a.node_float[:, : self.num_nodes]
        grown.edge_int[:, : self.num_edges] = a.edge_int[:, : self.num_edges]
        grown.edge_float[:, : self.num_edges] = a.edge_float[:, : self.num_edges]
        grown.q_bounds[:] = a.q_bounds
        self.arrays = grown

    node_visits = _Row("node_int", NODE_VISITS)
    node_virtual = _Row("node_int", NODE_VIRTUAL)
    node_first_edge = _Row("node_int", NODE_FIRST_EDGE)
    node_num_edges = _Row("node_int", NODE_NUM_EDGES)
    node_terminal = _Row("node_int", NODE_TERMINAL)
    node_templated = _Row("node_int", NODE_TEMPLATED)
    node_depth = _Row("node_int", NODE_DEPTH)
    node_value_sum = _Row("node_float", NODE_VALUE_SUM)
    node_raw_value = _Row("node_float", NODE_RAW_VALUE)
    edge_action = _Row("edge_int", EDGE_ACTION)
    edge_child = _Row("edge_int", EDGE_CHILD)
    edge_visits = _Row("edge_int", EDGE_VISITS)
    edge_virtual = _Row("edge_int", EDGE_VIRTUAL)
    edge_template = _Row("edge_int", EDGE_TEMPLATE)
    edge_prior = _Row("edge_float", EDGE_PRIOR)
    edge_reward = _Row("edge_float", EDGE_REWARD)

    def edges(self, node: int) -> range:
        first = int(self.node_first_edge[node])
        return range(first, first + int(self.node_num_edges[node]))

    def node_value(self, node: int) -> float:
        """Mean backed-up value V(node) (its evaluation before any visit)."""
        visits = int(self.node_visits[node])
        return float(self.node_value_sum[node]) / visits if visits else float(self.node_raw_value[node])

    def q_value(self, edge: int, gamma: float) -> float:
        """Q(s,a) = r + gamma * V(child); NaN while the edge is unvisited."""
        child = int(self.edge_child[edge])
        if self.edge_visits[edge] == 0 or child == NO_CHILD:
            return float("nan")
        return float(self.edge_reward[edge]) + gamma * self.node_value(child)

    def node_statistics(self, node: int, gamma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Visit counts, Q values (NaN if unvisited) and priors of `node`'s edges, indexed by action."""
        edges = np.array(self.edges(node), np.int64)
        actions = self.edge_action[edges]
        visits = np.zeros(len(edges), np.int64)
        priors = np.zeros(len(edges))
        q = np.full(len(edges), np.nan)
        visits[actions] = self.edge_visits[edges]
        priors[actions] = self.edge_prior[edges]
        q[actions] = [self.q_value(int(e), gamma) for e in edges]
        return visits, q, priors

    def principal_variation(self, node: int = 0, max_length: int = 1000) -> list[int]:
        """Actions along the most visited path from `node` (stops at unvisited edges)."""
        actions: list[int] = []
        seen = {node}
        while len(actions) < max_length and self.node_num_edges[node] > 0:
            best = max(self.edges(node), key=lambda e: (int(self.edge_visits[e]), float(self.edge_prior[e]), -e))
            child = int(self.edge_child[best])
            if self.edge_visits[best] == 0 or child == NO_CHILD:
                break
            actions.append(int(self.edge_action[best]))
            if child in seen:  # a cycle through a transposition
                break
            seen.add(child)
            node = child
        return actions
