"""Search semantics on tiny games: root noise, discounted backup, transpositions, early stop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from evoskill.core.errors import InvalidInput
from evoskill.core.search import Evaluation, Root, SearchConfig, Transition, search, warm_up
from evoskill.core.search.mcts import SearchCancelled
from evoskill.core.search.result import SearchResult
from evoskill.core.search.tree import Tree
from evoskill.core.search.types import SearchStats

QUIET = {"dirichlet_weight": 0.0, "early_stop_fraction": None}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


class Chain:
    """s0 -a-> s1 -a-> s2 (terminal); rewards 1 then 2; every non-terminal state is worth 10."""

    def step(self, state: int, action: int) -> Transition:
        return Transition(state + 1, float(state + 1), state + 1 == 2, state + 1, 1)

    def evaluate(self, states: Sequence[int]) -> Evaluation:
        return Evaluation(np.zeros((len(states), 1)), np.full(len(states), 10.0))


def test_discounted_backup_by_hand() -> None:
    chain = Chain()
    config = SearchConfig(num_simulations=1, gamma=0.5, **QUIET)  # type: ignore[arg-type]
    one = search(Root(0, 1, key=0), chain.step, config, chain.evaluate)
    # s1 is new, worth 10: Q(s0, a) = r1 + gamma * V(s1) = 1 + 0.5 * 10 = 6
    assert one.q_values[0] == pytest.approx(6.0)
    # the root's value: mean of its evaluation (10) and the backed-up return (6)
    assert one.root_value == pytest.approx(8.0)

    two = search(Root(0, 1, key=0), chain.step, SearchConfig(num_simulations=2, gamma=0.5, **QUIET), chain.evaluate)  # type: ignore[arg-type]
    # second simulation reaches s2 (terminal, value 0): G(s1) = r2 + 0.5 * 0 = 2, so V(s1) = (10 + 2) / 2 = 6;
    # Q(s0, a) = 1 + 0.5 * 6 = 4
    tree = two.tree
    assert tree.node_value(1) == pytest.approx(6.0)
    assert two.q_values[0] == pytest.approx(4.0)
    # root returns: 6 (first), 1 + 0.5 * 2 = 2 (second); with its evaluation 10: (10 + 6 + 2) / 3
    assert two.root_value == pytest.approx(6.0)
    assert two.stats.max_depth == 2
    assert two.stats.env_steps == 2
    assert two.principal_variation() == [0, 0]


class Fan:
    """The root has 5 actions; every other state has 3; the evaluator gives fixed logits."""

    root_logits = np.array([2.0, 1.0, 0.0, -1.0, 0.5])
    child_logits = np.array([0.3, -0.2, 1.1])

    def step(self, state: tuple[int, ...], action: int) -> Transition:
        nxt = (*state, action)
        return Transition(nxt, 0.0, len(nxt) >= 3, nxt, 3)

    def evaluate(self, states: Sequence[tuple[int, ...]]) -> Evaluation:
        return Evaluation([self.root_logits if not s else self.child_logits for s in states], np.zeros(len(states)))


def test_dirichlet_noise_at_root_only() -> None:
    fan = Fan()
    noisy = SearchConfig(num_simulations=30, dirichlet_alpha=0.3, dirichlet_weight=0.25, seed=7)
    result = search(Root((), 5), fan.step, noisy, fan.evaluate)
    clean = softmax(fan.root_logits)
    assert result.priors.sum() == pytest.approx(1.0)
    assert not np.allclose(result.priors, clean)
    # the noise share is bounded: p = 0.75 * clean + 0.25 * dirichlet
    assert np.all(result.priors >= 0.75 * clean - 1e-12)
    tree = result.tree
    children = {int(tree.edge_child[e]) for e in tree.edges(0) if tree.edge_child[e] >= 0}
    assert children
    for child in children:
        _, _, priors = tree.node_statistics(child, 1.0)
        np.testing.assert_allclose(priors, softmax(fan.child_logits))
    # seeded: same seed, same noise; another seed, other noise
    again = search(Root((), 5), fan.step, noisy, fan.evaluate)
    np.testing.assert_array_equal(again.priors, result.priors)
    np.testing.assert_array_equal(again.visit_counts, result.visit_counts)
    other = search(Root((), 5), fan.step, SearchConfig(num_simulations=30, seed=8), fan.evaluate)
    assert not np.allclose(other.priors, result.priors)
    without = search(Root((), 5), fan.step, SearchConfig(num_simulations=30, dirichlet_weight=0.0), fan.evaluate)
    np.testing.assert_allclose(without.priors, clean)


class Diamond:
    """Root actions 0 and 1 both reach state "M" (reward 1 and 0); M's one action ends the game."""

    def step(self, state: str, action: int) -> Transition:
        if state == "root":
            return Transition("M", 1.0 - action, False, "M", 1)
        return Transition("end", 5.0, True, "end", 0)

    def evaluate(self, states: Sequence[str]) -> Evaluation:
        return Evaluation(None, np.full(len(states), 2.0))


@pytest.mark.parametrize("batch_size", [1, 4])
def test_transpositions_share_nodes(batch_size: int) -> None:
    diamond = Diamond()
    config = SearchConfig(num_simulations=6, gamma=1.0, batch_size=batch_size, **QUIET)  # type: ignore[arg-type]
    shared = search(Root("root", 2, key="root"), diamond.step, config, diamond.evaluate)
    tree = shared.tree
    child_0, child_1 = (int(tree.edge_child[e]) for e in tree.edges(0))
    assert child_0 == child_1  # one node for "M", reached by both root actions
    assert shared.stats.transposition_hits == 1
    assert shared.stats.nodes == 3  # root, M, end
    # M's statistics are shared: its visits are the sum over both edges into it
    assert tree.node_visits[child_0] == shared.visit_counts.sum()
    # Q(root, a) = r(a) + V(M) with the same V(M): the edges differ by their rewards only
    assert shared.q_values[0] - shared.q_values[1] == pytest.approx(1.0)

    as_tree = config.model_copy(update={"transpositions": False})
    separate = search(Root("root", 2, key="root"), diamond.step, as_tree, diamond.evaluate)
    assert separate.stats.transposition_hits == 0
    assert separate.stats.nodes > shared.stats.nodes


class Dominated:
    """Action 0 is worth 1, the other 3 are worth -1, and the prior knows it."""

    def step(self, state: int, action: int) -> Transition:
        return Transition(action, 1.0 if action == 0 else -1.0, True, None, 0)

    def evaluate(self, states: Sequence[Any]) -> Evaluation:
        return Evaluation([np.array([3.0, 0.0, 0.0, 0.0])], np.zeros(len(states)))


def test_early_stop_when_no_action_can_overtake() -> None:
    game = Dominated()
    config = SearchConfig(num_simulations=200, early_stop_fraction=0.6, dirichlet_weight=0.0)
    result = search(Root(-1, 4), game.step, config, game.evaluate)
    assert result.stats.early_stopped
    assert result.stats.simulations < 200
    top, second = np.sort(result.visit_counts)[::-1][:2]
    remaining = 200 - result.stats.simulations
    assert top >= 0.6 * 200
    assert top > second + remaining
    assert result.action == 0
    assert result.visit_counts.sum() == result.stats.simulations

    full = search(Root(-1, 4), game.step, SearchConfig(num_simulations=200, early_stop_fraction=None), game.evaluate)
    assert not full.stats.early_stopped
    assert full.stats.simulations == 200


def test_terminal_root_and_validation() -> None:
    result = search(Root("done", 0), Diamond().step, SearchConfig(num_simulations=5))
    assert result.action == -1
    assert result.stats.simulations == 0
    with pytest.raises(InvalidInput, match="num_simulations"):
        SearchConfig(num_simulations=0)
    with pytest.raises(InvalidInput, match="unvisited_q"):
        SearchConfig(unvisited_q="zero")  # type: ignore[arg-type]
    # A callback that breaks the contract is a bug, not bad input.
    with pytest.raises(ValueError, match="one logit per legal action") as info:
        search(Root((), 5), Fan().step, SearchConfig(num_simulations=2), lambda s: Evaluation([np.zeros(2)], [0.0]))
    assert not isinstance(info.value, InvalidInput)


def test_warm_up_runs_every_kernel() -> None:
    assert warm_up() >= 0.0


def test_a_cancelled_search_ends_before_its_next_round() -> None:
    chain, rounds = Chain(), []

    def cancelled() -> bool:
        rounds.append(1)
        return len(rounds) > 1  # the caller goes away after the first round

    with pytest.raises(SearchCancelled, match="after 1 of 50 simulations"):
        search(Root(0, 1, key=0), chain.step, SearchConfig(num_simulations=50, batch_size=1, **QUIET),  # type: ignore[arg-type]
               chain.evaluate, cancelled=cancelled)


def test_a_result_without_ruled_out_actions_teaches_none_of_them() -> None:
    puct = SearchResult(0, np.array([5, 1, 2, 0]), np.full(4, np.nan), np.array([0.7, 0.1, 0.1, 0.1]), 0.0,
                        SearchStats(0, 0, 0, 0, 0, 0, 0, False, 0.0), Tree(1, 1), [])
    assert puct.preference() == [0, 2, 1, 3]  # the chosen one, then by visits, ties by prior
    dropped = np.array([True, False, False, False])
    pruned = puct.without(dropped, 2)
    assert pruned.action == 2 and pruned.visit_counts.tolist() == [0, 1, 2, 0] and pruned.policy_target is None
    gumbel = replace(puct, policy_target=np.array([0.6, 0.1, 0.3, 0.0]))
    assert gumbel.preference() == [0, 2, 1, 3]
    assert np.allclose(gumbel.without(dropped, 2).policy_target, [0.0, 0.25, 0.75, 0.0])
    assert gumbel.without(np.array([True, True, True, True]), 0).policy_target is None  # nothing left to teach
