"""PUCT arithmetic on a hand-built tree: every expected choice is worked out in the comments."""

from __future__ import annotations

import math

import pytest

from evoskill.core.search import NO_CHILD, SearchConfig, Tree
from evoskill.core.search.puct import kernel_params, select_edge


def tiny_tree() -> Tree:
    """Root (N=4: its expansion plus 3 visits, V=0.5) with three edges, sorted by prior.

    edge  prior  N(s,a)  reward  child V      Q = r + V (gamma 1)
    0     0.5    2       0.1     1.0/2 = 0.5  0.6
    1     0.3    1       0.0     0.9/1 = 0.9  0.9
    2     0.2    0       -       -            unvisited
    """
    tree = Tree(4, 4)
    tree.node_visits[0], tree.node_value_sum[0] = 4, 2.0
    tree.node_first_edge[0], tree.node_num_edges[0] = 0, 3
    edges = [(0.5, 2, 0.1, 1), (0.3, 1, 0.0, 2), (0.2, 0, 0.0, NO_CHILD)]
    for edge, (prior, visits, reward, child) in enumerate(edges):
        tree.edge_action[edge] = edge
        tree.edge_prior[edge] = prior
        tree.edge_visits[edge] = visits
        tree.edge_reward[edge] = reward
        tree.edge_child[edge] = child
    tree.node_visits[1], tree.node_value_sum[1] = 2, 1.0
    tree.node_visits[2], tree.node_value_sum[2] = 1, 0.9
    tree.num_nodes, tree.num_edges = 3, 3
    return tree


def select(tree: Tree, **config: object) -> int:
    settings: dict[str, object] = {"gamma": 1.0, "normalize_q": False, "unvisited_q": 0.0, **config}
    return int(select_edge(*tree.arrays, kernel_params(SearchConfig(**settings)), 0))  # type: ignore[arg-type]


def puct(q: float, prior: float, parent_visits: int, visits: int, c: float) -> float:
    return q + c * prior * math.sqrt(parent_visits) / (1 + visits)


def test_puct_scores_by_hand() -> None:
    tree = tiny_tree()
    # c = 1.5, sqrt(N) = 2: edge 0: 0.6 + 1.5*0.5*2/3 = 1.10; edge 1: 0.9 + 1.5*0.3*2/2 = 1.35;
    # edge 2: 0 + 1.5*0.2*2/1 = 0.60  -> edge 1
    assert puct(0.6, 0.5, 4, 2, 1.5) == pytest.approx(1.10)
    assert puct(0.9, 0.3, 4, 1, 1.5) == pytest.approx(1.35)
    assert select(tree, c_puct=1.5) == 1
    # c = 10: edge 0: 0.6 + 10/3 = 3.933; edge 1: 0.9 + 3 = 3.9; edge 2: 0 + 4 = 4.0 -> edge 2
    assert select(tree, c_puct=10.0) == 2
    # c = 0: pure exploitation -> the best Q, edge 1
    assert select(tree, c_puct=0.0) == 1


def test_unvisited_q_default() -> None:
    tree = tiny_tree()
    # c = 3: edge 0: 0.6 + 1 = 1.6; edge 1: 0.9 + 0.9 = 1.8; edge 2 with Q = 0: 1.2 -> edge 1
    assert select(tree, c_puct=3.0, unvisited_q=0.0) == 1
    # with Q(unvisited) = parent's value 2.0/4 = 0.5: edge 2: 0.5 + 1.2 = 1.7 -> still edge 1
    assert select(tree, c_puct=3.0, unvisited_q="parent") == 1
    # with Q(unvisited) = 0.7: edge 2: 0.7 + 1.2 = 1.9 -> edge 2
    assert select(tree, c_puct=3.0, unvisited_q=0.7) == 2


def test_normalized_q() -> None:
    tree = tiny_tree()
    tree.arrays.q_bounds[:] = [0.5, 0.9]
    # Q normalised by (q - 0.5) / 0.4: edge 0: 0.25, edge 1: 1.0, unvisited 0 -> -1.25
    # c = 3: edge 0: 0.25 + 1 = 1.25; edge 1: 1.0 + 0.9 = 1.9; edge 2: -1.25 + 1.2 = -0.05 -> edge 1
    assert select(tree, c_puct=3.0, normalize_q=True) == 1
    # c = 10: edge 0: 0.25 + 3.333 = 3.583; edge 1: 1 + 3 = 4.0; edge 2: -1.25 + 4 = 2.75 -> edge 1
    assert select(tree, c_puct=10.0, normalize_q=True) == 1
    assert select(tree, c_puct=10.0, normalize_q=False) == 2


def test_virtual_loss_steers_away() -> None:
    tree = tiny_tree()
    tree.edge_virtual[1] = 1
    tree.node_virtual[0] = 1
    # edge 1: Q = (1*0.9 - 1*1.0)/2 = -0.05, N = 2; sqrt(N(s)) = sqrt(5)
    # edge 0: 0.6 + 1.5*0.5*2.236/3 = 1.159; edge 1: -0.05 + 1.5*0.3*2.236/3 = 0.285 -> edge 0
    assert select(tree, c_puct=1.5, virtual_loss=1.0) == 0
    tree.edge_virtual[1] = 0
    tree.node_virtual[0] = 0
    assert select(tree, c_puct=1.5) == 1


def test_progressive_widening_and_cap() -> None:
    tree = tiny_tree()
    assert select(tree, c_puct=10.0) == 2
    # widening: ceil(1 * 4^0.5) = 2 edges compete (the two highest priors) -> edge 0 (3.933 > 3.9)
    assert select(tree, c_puct=10.0, widening_k=1.0, widening_alpha=0.5) == 0
    # ceil(0.5 * 4^0.5) = 1 -> only the highest prior
    assert select(tree, c_puct=1.5, widening_k=0.5, widening_alpha=0.5) == 0
    assert select(tree, c_puct=10.0, max_children=2) == 0
    assert select(tree, c_puct=10.0, max_children=3) == 2


def test_template_first_selection() -> None:
    tree = tiny_tree()
    # templates: edge 0 alone in template 5; edges 1, 2 in template 9 (sorted runs)
    tree.edge_template[:3] = [5, 9, 9]
    tree.node_templated[0] = 1
    # template level, c = 1.5, sqrt(N) = 2:
    #   T5: Q = 0.6, P = 0.5, N = 2: 0.6 + 1.5*0.5*2/3 = 1.1
    #   T9: Q = 0.9 (visit-weighted), P = 0.5, N = 1: 0.9 + 1.5*0.5*2/2 = 1.65 -> T9
    # inside T9, N = 1, priors 0.6/0.4: edge 1: 0.9 + 1.5*0.6*1/2 = 1.35; edge 2: 0 + 1.5*0.4 = 0.6
    assert select(tree, c_puct=1.5, hierarchical=True) == 1
    # c = 10: T5: 0.6 + 10*0.5*2/3 = 3.93; T9: 0.9 + 10*0.5*2/2 = 5.9 -> T9;
    # inside: edge 1: 0.9 + 10*0.6/2 = 3.9; edge 2: 0 + 10*0.4/1 = 4.0 -> edge 2
    assert select(tree, c_puct=10.0, hierarchical=True) == 2
