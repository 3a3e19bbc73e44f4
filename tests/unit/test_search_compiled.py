"""`search_compiled` (the whole loop in numba) builds the tree `search` (Python callbacks) builds.

Every game here is one table, so one pair of compiled functions (one loop compile) serves them
all: row s of the table is state s: [num_actions, value, logits[A], (next, reward, done)[A]].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from evoskill.core.search import (
    Evaluation,
    Root,
    SearchConfig,
    SearchResult,
    Transition,
    search,
    search_compiled,
    warm_up_compiled,
)
from evoskill.core.search.compiled import chain_evaluate, chain_step, loop_for
from evoskill.core.search.jit import jit

QUIET = {"dirichlet_weight": 0.0, "early_stop_fraction": None}


@jit
def table_step(env: np.ndarray, state: np.ndarray, action: int, next_state: np.ndarray) -> tuple[float, bool, int]:
    width = (env.shape[1] - 2) // 4
    base = 2 + width + 3 * action
    nxt = int(env[state[0], base])
    next_state[0] = nxt
    return env[state[0], base + 1], env[state[0], base + 2] > 0.0, int(env[nxt, 0])


@jit
def table_evaluate(env: np.ndarray, states: np.ndarray, logits: np.ndarray, values: np.ndarray) -> None:
    for i in range(states.shape[0]):
        s = states[i, 0]
        values[i] = env[s, 1]
        for a in range(int(env[s, 0])):
            logits[i, a] = env[s, 2 + a]


class TableGame:
    """A table of states; `step`/`evaluate` are the Python callbacks over the same numbers."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.rows: list[np.ndarray] = []

    def add(self, num_actions: int, value: float = 0.0, logits: Sequence[float] = ()) -> int:
        row = np.zeros(2 + 4 * self.width)
        row[0], row[1] = num_actions, value
        row[2 : 2 + len(logits)] = logits
        self.rows.append(row)
        return len(self.rows) - 1

    def link(self, state: int, action: int, nxt: int, reward: float = 0.0, done: bool = False) -> None:
        self.rows[state][2 + self.width + 3 * action : 5 + self.width + 3 * action] = (nxt, reward, done)

    @property
    def env(self) -> np.ndarray:
        return np.array(self.rows)

    def step(self, state: int, action: int) -> Transition:
        row = self.rows[state]
        base = 2 + self.width + 3 * action
        nxt = int(row[base])
        return Transition(nxt, float(row[base + 1]), bool(row[base + 2] > 0), None, int(self.rows[nxt][0]))

    def evaluate(self, states: Sequence[int]) -> Evaluation:
        rows = [self.rows[s] for s in states]
        return Evaluation([r[2 : 2 + int(r[0])] for r in rows], np.array([r[1] for r in rows]))

    def compiled(self, config: SearchConfig, root: int = 0) -> SearchResult:
        state = np.array([root], np.int64)
        return search_compiled(state, int(self.rows[root][0]), table_step, table_evaluate, config, self.env, self.width)

    def python(self, config: SearchConfig, root: int = 0) -> SearchResult:
        return search(Root(root, int(self.rows[root][0])), self.step, config, self.evaluate)


def random_tree(seed: int, depth: int = 4, width: int = 3) -> TableGame:
    """A tree with 1..width actions per state, random rewards, values, logits, some early ends."""
    rng = np.random.default_rng(seed)
    game = TableGame(width)

    def grow(level: int) -> int:
        if level == depth:
            return game.add(0)
        num = int(rng.integers(1, width + 1))
        state = game.add(num, float(rng.normal()), rng.normal(size=num).tolist())
        for action in range(num):
            child = grow(level + 1)
            game.link(state, action, child, float(rng.normal()), done=bool(rng.random() < 0.15))
        return state

    grow(0)
    return game


def assert_same_search(a: SearchResult, b: SearchResult) -> None:
    np.testing.assert_array_equal(a.visit_counts, b.visit_counts)
    np.testing.assert_array_equal(a.q_values, b.q_values)
    np.testing.assert_array_equal(a.priors, b.priors)
    assert a.root_value == b.root_value
    assert a.action == b.action
    sa, sb = a.stats, b.stats
    assert (sa.simulations, sa.nodes, sa.max_depth, sa.env_steps, sa.evaluations, sa.evaluated_states) == (
        sb.simulations, sb.nodes, sb.max_depth, sb.env_steps, sb.evaluations, sb.evaluated_states,
    )  # fmt: skip
    assert sa.early_stopped == sb.early_stopped
    ta, tb = a.tree, b.tree
    nodes, edges = tb.num_nodes, tb.num_edges
    assert (ta.num_nodes, ta.num_edges) == (nodes, edges)
    np.testing.assert_array_equal(ta.arrays.node_int[:, :nodes], tb.arrays.node_int[:, :nodes])
    np.testing.assert_array_equal(ta.arrays.edge_int[:, :edges], tb.arrays.edge_int[:, :edges])
    np.testing.assert_array_equal(ta.arrays.node_float[:, :nodes], tb.arrays.node_float[:, :nodes])
    np.testing.assert_array_equal(ta.arrays.edge_float[:, :edges], tb.arrays.edge_float[:, :edges])
    # node n's state: a row of the state array there, the object step returned here
    assert [int(s[0]) for s in a.states] == list(b.states)


@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("seed", [0, 1])
def test_same_tree_as_search_with_callbacks(seed: int, batch_size: int) -> None:
    game = random_tree(seed)
    config = SearchConfig(num_simulations=60, gamma=0.9, batch_size=batch_size, early_stop_fraction=None, seed=seed)
    compiled = game.compiled(config)
    assert_same_search(compiled, game.python(config))
    assert compiled.stats.simulations == 60
    # the bench's settings: raw Q, constant Q for unvisited edges, widening
    raw = config.model_copy(update={"normalize_q": False, "unvisited_q": 0.0, "widening_k": 1.0,
                                    "dirichlet_weight": 0.0})
    assert_same_search(game.compiled(raw), game.python(raw))


def two_actions() -> TableGame:
    """Root: action 0 ends with reward -1; action 1 (reward 0.5) reaches s2, worth 0.2, whose one
    action ends with reward 2."""
    game = TableGame(2)
    root = game.add(2, 0.0, [0.0, 0.0])
    end_0 = game.add(0)
    s2 = game.add(1, 0.2, [0.0])
    end_2 = game.add(0)
    game.link(root, 0, end_0, -1.0, done=True)
    game.link(root, 1, s2, 0.5)
    game.link(s2, 0, end_2, 2.0, done=True)
    return game


def test_two_action_tree_by_hand() -> None:
    config = SearchConfig(num_simulations=3, c_puct=1.0, gamma=0.5, normalize_q=False, unvisited_q=0.0, **QUIET)  # type: ignore[arg-type]
    result = two_actions().compiled(config)
    # 1st: both unvisited, tie to action 0: reward -1, terminal.
    # 2nd: a0 scores -1 + 0.5 * sqrt(2) / 2 = -0.65, a1 0 + 0.5 * sqrt(2) = 0.71: a1, s2 worth 0.2:
    #      Q(a1) = 0.5 + 0.5 * 0.2 = 0.6.
    # 3rd: a0 -1 + 0.5 * sqrt(3) / 2 = -0.57, a1 0.6 + 0.5 * sqrt(3) / 2 = 1.03: a1 then s2's action,
    #      reward 2, terminal: G(s2) = 2, V(s2) = (0.2 + 2) / 2 = 1.1, Q(a1) = 0.5 + 0.5 * 1.1 = 1.05.
    np.testing.assert_array_equal(result.visit_counts, [1, 2])
    np.testing.assert_allclose(result.q_values, [-1.0, 1.05])
    # root returns: its evaluation 0, then -1, 0.6 and 0.5 + 0.5 * 2 = 1.5
    assert result.root_value == pytest.approx((0.0 - 1.0 + 0.6 + 1.5) / 4)
    assert result.action == 1
    assert result.principal_variation() == [1, 0]
    assert [int(s[0]) for s in result.states] == [0, 1, 2, 3]
    assert result.stats.max_depth == 2 and result.stats.env_steps == 3
    assert result.stats.evaluations == 2  # the root and s2; the terminal states are not evaluated


def test_batch_with_virtual_loss_spreads_leaves() -> None:
    # With 2 leaves per batch the second leaf avoids the first one's edge (virtual loss): both root
    # actions are stepped in the first batch, and one evaluate call takes s2 (the other is terminal).
    config = SearchConfig(num_simulations=2, batch_size=2, c_puct=1.0, gamma=0.5, **QUIET)  # type: ignore[arg-type]
    game = two_actions()
    result = game.compiled(config)
    np.testing.assert_array_equal(result.visit_counts, [1, 1])
    assert result.stats.evaluations == 2 and result.stats.evaluated_states == 2
    assert_same_search(result, game.python(config))


def test_dirichlet_noise_at_root_only() -> None:
    game = random_tree(3)
    noisy = SearchConfig(num_simulations=40, dirichlet_alpha=0.3, dirichlet_weight=0.25, seed=7)
    result = game.compiled(noisy)
    assert_same_search(result, game.python(noisy))  # the same noise: drawn from the config's seed
    root = game.rows[0]
    clean = np.exp(root[2 : 2 + int(root[0])])
    clean /= clean.sum()
    priors = result.priors
    assert priors.sum() == pytest.approx(1.0)
    assert not np.allclose(priors, clean)
    tree = result.tree
    for node in range(1, tree.num_nodes):  # every other node has its clean softmax priors
        row = game.rows[int(result.states[node][0])]
        if row[0] > 0:
            _, _, child_priors = tree.node_statistics(node, 1.0)
            logits = row[2 : 2 + int(row[0])]
            np.testing.assert_allclose(child_priors, np.exp(logits) / np.exp(logits).sum())


def test_early_stop() -> None:
    game = TableGame(4)  # action 0 is worth 1, the other 3 -1, and the prior knows it
    root = game.add(4, 0.0, [3.0, 0.0, 0.0, 0.0])
    for action in range(4):
        game.link(root, action, game.add(0), 1.0 if action == 0 else -1.0, done=True)
    config = SearchConfig(num_simulations=200, early_stop_fraction=0.6, dirichlet_weight=0.0)
    result = game.compiled(config)
    assert result.stats.early_stopped and result.stats.simulations < 200
    assert result.action == 0
    assert_same_search(result, game.python(config))


def test_terminal_root_and_validation() -> None:
    game = two_actions()
    done = search_compiled(np.array([1], np.int64), 0, table_step, table_evaluate, SearchConfig(), game.env, 2)
    assert done.action == -1 and done.stats.simulations == 0 and done.stats.nodes == 1
    root = np.array([0], np.int64)
    with pytest.raises(ValueError, match="max_actions"):
        search_compiled(root, 2, table_step, table_evaluate, SearchConfig(), game.env, max_actions=1)
    wide = TableGame(3)  # the root has 1 action, its child 3: more than max_actions=1
    start = wide.add(1, 0.0, [0.0])
    wide.link(start, 0, wide.add(3, 0.0, [0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="more actions than max_actions"):
        search_compiled(root, 1, table_step, table_evaluate, SearchConfig(num_simulations=2), wide.env)


def test_one_loop_per_pair_of_functions() -> None:
    assert warm_up_compiled(table_step, table_evaluate, np.array([0], np.int64), 2, two_actions().env) >= 0.0
    table = loop_for(table_step, table_evaluate)
    assert loop_for(table_step, table_evaluate) is table  # compiled once per process
    chain = loop_for(chain_step, chain_evaluate)
    # each pair is cached on disk under its own name: one must never load the other
    assert getattr(table, "py_func", table).__qualname__ != getattr(chain, "py_func", chain).__qualname__
