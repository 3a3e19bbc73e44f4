"""Batched leaf evaluation under virtual loss."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from evoskill.core.search import Evaluation, Root, SearchConfig, Transition, search


class Uniform:
    """Branching 4, depth 3, uniform priors, every value 0: the search visits breadth first."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def step(self, state: tuple[int, ...], action: int) -> Transition:
        nxt = (*state, action)
        return Transition(nxt, 0.0, len(nxt) == 3, nxt, 4)

    def evaluate(self, states: Sequence[tuple[int, ...]]) -> Evaluation:
        self.batches.append(len(states))
        return Evaluation(np.zeros((len(states), 4)), np.zeros(len(states)))


def run(batch_size: int, simulations: int) -> tuple[Uniform, np.ndarray, set[tuple[int, ...]]]:
    game = Uniform()
    config = SearchConfig(
        num_simulations=simulations, batch_size=batch_size, dirichlet_weight=0.0, early_stop_fraction=None
    )
    result = search(Root((), 4, key=()), game.step, config, game.evaluate)
    assert result.stats.simulations == simulations
    assert result.stats.evaluations == len(game.batches)
    return game, result.visit_counts, set(result.states)


@pytest.mark.parametrize("batch_size", [2, 4, 8])
def test_batches_respect_batch_size(batch_size: int) -> None:
    game, _, _ = run(batch_size, 40)
    assert game.batches[0] == 1  # the root, alone
    assert max(game.batches) <= batch_size
    assert max(game.batches[1:]) == batch_size  # leaves really are evaluated together
    assert len(game.batches) < 40


def test_batched_equals_sequential_where_it_should() -> None:
    # With uniform priors and equal values, sequential PUCT visits the 4 root actions in turn and then
    # their children in turn; virtual loss makes a batch of 4 pick the same 4 leaves at once.
    _, sequential_visits, sequential_states = run(1, 20)
    for batch_size in (2, 4):
        _, visits, states = run(batch_size, 20)
        np.testing.assert_array_equal(visits, sequential_visits)
        assert states == sequential_states
    np.testing.assert_array_equal(sequential_visits, [5, 5, 5, 5])


def test_collisions_end_a_batch_without_double_steps() -> None:
    # A root with a single action: every batch after the first collides at once, so each edge is
    # still stepped exactly once (one env step per new node).
    class Line:
        def step(self, state: int, action: int) -> Transition:
            return Transition(state + 1, 0.0, state + 1 == 50, None, 1)

    result = search(Root(0, 1), Line().step, SearchConfig(num_simulations=20, batch_size=8, early_stop_fraction=None))
    assert result.stats.simulations == 20
    assert result.stats.env_steps == result.stats.nodes - 1
    tree = result.tree
    assert not tree.node_virtual[: tree.num_nodes].any()
    assert not tree.edge_virtual[: tree.num_edges].any()


def test_step_batch_gets_the_new_edges_of_a_batch_at_once() -> None:
    game = Uniform()
    calls: list[int] = []

    def step_batch(pairs: list[tuple[tuple[int, ...], int]]) -> list[Transition]:
        calls.append(len(pairs))
        return [game.step(state, action) for state, action in pairs]

    config = SearchConfig(num_simulations=20, batch_size=4, dirichlet_weight=0.0, early_stop_fraction=None)
    batched = search(Root((), 4, key=()), game.step, config, game.evaluate, step_batch=step_batch)
    one_by_one = search(Root((), 4, key=()), game.step, config, game.evaluate)
    assert max(calls) == 4
    assert sum(calls) == batched.stats.env_steps
    np.testing.assert_array_equal(batched.visit_counts, one_by_one.visit_counts)
