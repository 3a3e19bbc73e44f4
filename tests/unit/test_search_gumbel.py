"""Gumbel MuZero: the halving schedule and the improved policy by hand, then behaviour on toy games."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.bench.search_targets import Combination
from evoskill.core.errors import InvalidInput
from evoskill.core.search import NO_CHILD, Evaluation, Root, SearchConfig, StepFn, Transition, Tree, search
from evoskill.core.search.gumbel import considered_visits
from evoskill.core.search.improved import completed_q, improved_logits, select_interior_edge
from evoskill.core.search.puct import kernel_params
from tests.unit.test_search_games import CODE, HashGame, kitchen_step, legal, lock_step, replay, templates


@pytest.mark.parametrize(
    ("max_considered", "simulations", "expected"),
    [
        # 8 actions, 24 = 8 * log2(8): 8 once, 4 twice, 2 four times
        (8, 24, [0] * 8 + [1] * 4 + [2] * 4 + [3, 3, 4, 4, 5, 5, 6, 6]),
        (8, 13, [0] * 8 + [1] * 4 + [2]),  # the budget runs out mid-phase
        (8, 2, [0, 0]),  # fewer simulations than actions: the top 2 of the Gumbel-top-k once each
        (7, 24, [0] * 7 + [1, 1, 1, 2, 2, 2] + [3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8]),  # 7 -> 3 -> 2
        (1, 5, [0, 1, 2, 3, 4]),  # one action takes every simulation
    ],
)
def test_halving_schedule(max_considered: int, simulations: int, expected: list[int]) -> None:
    assert considered_visits(max_considered, simulations).tolist() == expected


def hand_tree() -> Tree:
    """Root (evaluated at 0.2) with three edges, gamma 1; the same numbers as test_search_puct's tiny tree.

    edge  prior  N  reward  V(child)  Q
    0     0.5    2  0.1     0.5       0.6
    1     0.3    1  0.0     0.9       0.9
    2     0.2    0  -       -         unvisited
    """
    tree = Tree(4, 4)
    tree.node_visits[0], tree.node_value_sum[0], tree.node_raw_value[0] = 4, 2.0, 0.2
    tree.node_first_edge[0], tree.node_num_edges[0] = 0, 3
    rows = [(0.5, 2, 0.1, 1), (0.3, 1, 0.0, 2), (0.2, 0, 0.0, NO_CHILD)]
    for edge, (prior, visits, reward, child) in enumerate(rows):
        tree.edge_action[edge], tree.edge_prior[edge], tree.edge_visits[edge] = edge, prior, visits
        tree.edge_reward[edge], tree.edge_child[edge] = reward, child
    tree.node_visits[1], tree.node_value_sum[1] = 2, 1.0
    tree.node_visits[2], tree.node_value_sum[2] = 1, 0.9
    tree.num_nodes, tree.num_edges = 3, 3
    return tree


def test_completed_q_sigma_and_selection_by_hand() -> None:
    tree = hand_tree()
    # v_mix = (v + N * sum_visited p Q / sum_visited p) / (1 + N), N = 3
    weighted = (0.5 * 0.6 + 0.3 * 0.9) / (0.5 + 0.3)
    v_mix = (0.2 + 3 * weighted) / 4
    q = completed_q(*tree.arrays[:4], 1.0, 0)
    np.testing.assert_allclose(q, [0.6, 0.9, v_mix])
    # sigma = (c_visit + max N) * c_scale * (q - min) / (max - min), max N = 2
    params = kernel_params(SearchConfig(gamma=1.0, gumbel_c_visit=50.0, gumbel_c_scale=0.1))
    scaled = (q - q.min()) / (q.max() - q.min())
    logits = np.log([0.5, 0.3, 0.2]) + 52 * 0.1 * scaled
    np.testing.assert_allclose(improved_logits(*tree.arrays[:4], params, 0), logits)
    # deterministic rule: argmax pi' - N / (1 + sum N): pi' ~ [0.01, 0.98, 0.00], N / 4 = [0.5, 0.25, 0]
    policy = np.exp(logits) / np.exp(logits).sum()
    assert int(np.argmax(policy - np.array([2, 1, 0]) / 4)) == 1
    assert select_interior_edge(*tree.arrays[:4], params, 0) == 1
    # a visit-hungry sigma no longer overrides the counts: c_scale tiny -> pi' ~ prior, edge 2 is owed visits
    flat = kernel_params(SearchConfig(gamma=1.0, gumbel_c_scale=1e-6))
    assert select_interior_edge(*tree.arrays[:4], flat, 0) == 2


def needle(best: int) -> StepFn:
    """One step: action `best` earns 1, every other action 0; terminal either way."""

    def step(state: int, action: int) -> Transition:
        return Transition(action, 1.0 if action == best else 0.0, True, None, 0)

    return step


@pytest.mark.parametrize("simulations", [8, 16])
def test_finds_the_best_action_where_visit_counts_stay_flat(simulations: int) -> None:
    """8 actions, uniform prior: Gumbel visits all 8 in its first phase and keeps the winner, and its target
    says so; PUCT's visit distribution, the same budget, barely leaves uniform."""
    step = needle(best=5)
    gumbel_mass, puct_mass, found, found_noiseless = [], [], 0, 0
    for seed in range(40):
        config = SearchConfig(algorithm="gumbel", num_simulations=simulations, seed=seed)
        g = search(Root(0, 8), step, config)
        found += g.action == 5
        found_noiseless += search(Root(0, 8), step, config.model_copy(update={"gumbel_scale": 0.0})).action == 5
        assert g.policy_target is not None
        gumbel_mass.append(g.policy_target[5])
        p = search(Root(0, 8), step, SearchConfig(num_simulations=simulations, seed=seed, early_stop_fraction=None))
        puct_mass.append(p.visit_distribution[5])
    # The action is the best g + log pi + sigma among the most visited: a Gumbel draw more than sigma's
    # (50 + max N) * 0.1 above the winner's explores instead (4 of these 40 seeds); without noise, never.
    assert found >= 34 and found_noiseless == 40
    assert np.mean(gumbel_mass) > 0.95
    assert np.mean(puct_mass) < 0.6


def test_two_simulations_correct_a_misleading_prior() -> None:
    """θ puts a decoy first and the right action second: with 2 simulations Gumbel compares the two actions
    it samples and picks the right one whenever it is among them; PUCT, tied at one visit each, follows θ."""
    game = Combination("recipe", 30, (7, 19, 3), hint=3.0, decoy=3.5)
    target_mass, right, puct_right = [], 0, 0
    for seed in range(40):
        result = search(game.root(), game.step, SearchConfig(algorithm="gumbel", num_simulations=2, seed=seed),
                        game.evaluate)
        sampled = np.flatnonzero(result.visit_counts)
        assert len(sampled) == 2
        assert (result.action == game.best) == (game.best in sampled)
        right += result.action == game.best
        assert result.policy_target is not None
        target_mass.append(result.policy_target[game.best])
        puct = search(game.root(), game.step, SearchConfig(num_simulations=2, seed=seed), game.evaluate)
        puct_right += puct.action == game.best
    assert right >= 12 and puct_right <= 2
    assert np.mean(target_mass) > 1.5 * result.priors[game.best]  # the prior: 0.25


def test_improved_policy_covers_every_action_and_beats_the_prior_on_the_best() -> None:
    root = Root(frozenset(), len(legal(frozenset())), key=frozenset(), templates=templates(legal(frozenset())))
    result = search(root, kitchen_step, SearchConfig(algorithm="gumbel", num_simulations=64, gamma=0.95, seed=5))
    policy = result.policy_target
    assert policy is not None and policy.shape == (4,)
    assert abs(policy.sum() - 1.0) < 1e-9 and (policy > 0).all()
    assert result.visit_counts.sum() == 64
    # "finish" first earns nothing; any "take" is on the winning path
    takes = [i for i, a in enumerate(legal(frozenset())) if a.startswith("take")]
    assert result.action in takes
    assert policy[takes].sum() > result.priors[takes].sum()
    assert replay(result.principal_variation())[0].startswith("take")


def test_lock_with_enough_simulations() -> None:
    result = search(Root((), 3, key=()), lock_step, SearchConfig(algorithm="gumbel", num_simulations=300, seed=1))
    assert result.action == CODE[0]
    assert result.policy_target is not None and result.policy_target[CODE[0]] > 0.99


def test_deterministic_under_a_seed() -> None:
    game = Combination("recipe", 30, (7, 19, 3), hint=1.0, decoy=1.5)

    def run(seed: int) -> tuple[int, list[int], list[float]]:
        result = search(game.root(), game.step, SearchConfig(algorithm="gumbel", num_simulations=8, seed=seed),
                        game.evaluate)
        assert result.policy_target is not None
        return result.action, result.visit_counts.tolist(), result.policy_target.tolist()

    assert run(3) == run(3)
    assert len({tuple(run(seed)[1]) for seed in range(6)}) > 1  # the Gumbel draw picks the sampled actions


def test_a_halving_level_is_one_batch() -> None:
    """16 simulations over 8 actions: levels of 8, 4, 2, 2 -> four step_batch and four evaluate calls."""
    batches: list[int] = []
    evaluations: list[int] = []

    def step(state: tuple[int, ...], action: int) -> Transition:
        nxt = (*state, action)
        return Transition(nxt, float(action == 3 and len(nxt) == 1), len(nxt) == 6, nxt, 8)

    def step_batch(edges: list[tuple[tuple[int, ...], int]]) -> list[Transition]:
        batches.append(len(edges))
        return [step(s, a) for s, a in edges]

    def evaluate(states: Sequence[tuple[int, ...]]) -> Evaluation:
        evaluations.append(len(states))
        return Evaluation(None, np.zeros(len(states)))

    result = search(Root((), 8, key=()), step, SearchConfig(algorithm="gumbel", num_simulations=16, seed=0),
                    evaluate, step_batch=step_batch)
    assert batches == [8, 4, 2, 2]
    assert evaluations == [1, 8, 4, 2, 2]  # the root, then one call per level
    assert sorted(result.visit_counts.tolist(), reverse=True)[:2] == [4, 4]
    assert result.action == 3


def test_config_names_a_bad_algorithm() -> None:
    with pytest.raises(InvalidInput, match="algorithm"):
        SearchConfig(algorithm="alphazero")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="gumbel_max_actions"):
        SearchConfig(gumbel_max_actions=0)


@settings(max_examples=30, deadline=None)
@given(
    branching=st.integers(1, 5),
    depth=st.integers(1, 5),
    simulations=st.integers(1, 40),
    max_actions=st.integers(1, 6),
    key_space=st.sampled_from([3, 10**9]),
)
def test_invariants(branching: int, depth: int, simulations: int, max_actions: int, key_space: int) -> None:
    game = HashGame(branching, depth, key_space)
    config = SearchConfig(algorithm="gumbel", num_simulations=simulations, gumbel_max_actions=max_actions, max_depth=8)
    result = search(Root((), branching, key=(0, 0)), game.step, config, game.evaluate)
    tree, policy = result.tree, result.policy_target
    assert result.stats.simulations == simulations
    assert result.visit_counts.sum() == simulations
    assert (result.visit_counts > 0).sum() <= min(max_actions, branching)  # only the sampled actions
    assert not tree.node_virtual[: tree.num_nodes].any() and not tree.edge_virtual[: tree.num_edges].any()
    assert policy is not None and abs(policy.sum() - 1.0) < 1e-9
    assert result.visit_counts[result.action] == result.visit_counts.max()
    assert math.isclose(result.priors.sum(), 1.0)
