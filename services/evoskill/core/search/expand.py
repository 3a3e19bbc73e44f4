"""Expansion: create nodes and their edges with priors (a JIT kernel)."""

from __future__ import annotations

import math

import numpy as np

from evoskill.core.search.jit import jit
from evoskill.core.search.tree import (
    EDGE_ACTION,
    EDGE_CHILD,
    EDGE_PRIOR,
    EDGE_REWARD,
    EDGE_TEMPLATE,
    EDGE_VIRTUAL,
    EDGE_VISITS,
    NO_CHILD,
    NODE_FIRST_EDGE,
    NODE_NUM_EDGES,
    NODE_RAW_VALUE,
    NODE_TEMPLATED,
    NODE_TERMINAL,
    NODE_VALUE_SUM,
    NODE_VIRTUAL,
    NODE_VISITS,
)


@jit
def softmax(logits: np.ndarray) -> np.ndarray:
    top = -math.inf
    for x in logits:
        top = max(top, x)
    probs = np.exp(logits - top)
    return probs / probs.sum()


@jit
def expand_nodes(
    node_int: np.ndarray,
    node_float: np.ndarray,
    edge_int: np.ndarray,
    edge_float: np.ndarray,
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
    root_noise: np.ndarray,
    noise_weight: float,
) -> int:
    """Write nodes first_node.. and their edges from first_edge..; returns edges used.

    New node j has new_num_actions[j] actions, 0 for a terminal node (value 0, no edges). The
    others take, in order, one evaluation row each: its value, and its logits at
    logits[r * logits_width:] (a 2-D batch, flattened) or, when logits_width is 0, at
    logits[logits_start[r]:]. new_template_start[j] >= 0 points at node j's template ids. Dirichlet
    noise is mixed into node 0 only: the root is the one node where exploration is forced.
    Edges are stored by prior, highest first (stable, so equal priors keep action order), grouped
    by template (ascending ids) when the node has templates.
    """
    edge = first_edge
    row = 0
    for j in range(num_new):
        node = first_node + j
        num = new_num_actions[j]
        node_int[NODE_VISITS, node] = 0
        node_int[NODE_VIRTUAL, node] = 0
        node_int[NODE_FIRST_EDGE, node] = edge
        node_int[NODE_NUM_EDGES, node] = num
        node_int[NODE_TERMINAL, node] = num == 0
        node_int[NODE_TEMPLATED, node] = 0
        node_float[NODE_VALUE_SUM, node] = 0.0
        if num == 0:
            node_float[NODE_RAW_VALUE, node] = 0.0
            continue
        node_float[NODE_RAW_VALUE, node] = values[row]
        start = row * logits_width if logits_width > 0 else logits_start[row]
        row += 1
        probs = softmax(logits[start : start + num])
        if node == 0 and noise_weight > 0.0:
            probs = (1.0 - noise_weight) * probs + noise_weight * root_noise
        order = np.argsort(-probs, kind="mergesort")
        template_start = new_template_start[j]
        if template_start >= 0:
            node_templates = templates[template_start : template_start + num]
            order = order[np.argsort(node_templates[order], kind="mergesort")]
            node_int[NODE_TEMPLATED, node] = 1
        for k in range(num):
            action = order[k]
            edge_int[EDGE_ACTION, edge] = action
            edge_int[EDGE_CHILD, edge] = NO_CHILD
            edge_int[EDGE_VISITS, edge] = 0
            edge_int[EDGE_VIRTUAL, edge] = 0
            edge_int[EDGE_TEMPLATE, edge] = templates[template_start + action] if template_start >= 0 else 0
            edge_float[EDGE_PRIOR, edge] = probs[action]
            edge_float[EDGE_REWARD, edge] = 0.0
            edge += 1
    return edge - first_edge
