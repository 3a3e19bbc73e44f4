"""Search that runs out of time keeps its episode: the sandbox host answers the probes its budget allows, the
search model answers None for the edges left unstepped (and raises for missing rollouts), and `search` returns
what it has, its virtual loss taken back (the core with Python callbacks; the model over a real
TextWorldExpress game, the sandbox host in-process)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evoskill.core.reward import Scorer
from evoskill.core.search import SearchConfig, search
from evoskill.core.search.mcts import SearchOutOfTime
from evoskill.core.search.model import SearchModel
from evoskill.core.search.tree import EDGE_VIRTUAL, NODE_VIRTUAL
from evoskill.core.search.types import Evaluation, Root, Transition
from evoskill.platform.config import RewardSettings
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2

SCORE = Scorer(RewardSettings())
CONFIG = SearchConfig(num_simulations=32, batch_size=8, rollout_depth=0, early_stop_fraction=None,
                      dirichlet_weight=0.0)


def _chain(state: int, action: int) -> Transition:
    """A game of 3 actions a state, 4 deep; action 2 pays."""
    child = state * 3 + action + 1
    return Transition(child, 1.0 if action == 2 else 0.0, child > 40, child, 3)


def _no_virtual_loss(result: Any) -> bool:
    arrays = result.tree.arrays
    return not arrays.edge_int[EDGE_VIRTUAL].any() and not arrays.node_int[NODE_VIRTUAL].any()


def test_a_round_goes_on_with_the_edges_the_environment_had_time_for() -> None:
    answered = 12  # the budget's first 12 edges; then the time is up

    def step_batch(edges: list[tuple[int, int]]) -> list[Transition | None]:
        nonlocal answered
        out: list[Transition | None] = []
        for state, action in edges:
            out.append(_chain(state, action) if answered > 0 else None)
            answered -= 1
        return out

    result = search(Root(0, 3, 0), _chain, CONFIG, step_batch=step_batch)
    assert result.stats.timed_out and 0 < result.stats.simulations < CONFIG.num_simulations
    assert int(result.visit_counts.sum()) == result.stats.simulations and _no_virtual_loss(result)
    assert result.stats.env_steps == 12


def test_an_evaluation_out_of_time_drops_its_round_and_search_returns_the_rounds_before() -> None:
    calls = 0

    def evaluate(states: Sequence[Any]) -> Evaluation:
        nonlocal calls
        calls += 1
        if calls > 2:  # the root's, one round's
            raise SearchOutOfTime("no time for rollouts")
        return Evaluation(None, np.zeros(len(states)))

    result = search(Root(0, 3, 0), _chain, CONFIG, evaluate)
    # The first round takes the root's 3 edges (a 4th leaf would share one); the second round is dropped.
    assert result.stats.timed_out and result.stats.simulations == 3 and result.visit_counts.tolist() == [1, 1, 1]


def test_the_host_answers_the_probes_its_budget_allows_in_order(coin: EnvHost) -> None:
    probes = [sandbox_pb2.Probe(actions=[a], rollout_depth=5) for a in coin.env.valid_actions()]
    assert coin.simulate(probes, 0.97, budget_s=0.0) == ([], 0)
    results, steps = coin.simulate(probes, 0.97, budget_s=60.0)
    assert [r.transition.action.text for r in results] == [p.actions[0] for p in probes] and steps > 0
    assert 0 < coin.probe_s < 60
    coin.probe_s = 100.0  # recent probes took longer than this call's budget: its first one is not started
    assert coin.simulate(probes, 0.97, budget_s=60.0) == ([], 0)
    results, _ = coin.simulate([sandbox_pb2.Probe(), *probes], 0.97, budget_s=0.0)  # the root is read regardless
    assert len(results) == 1 and results[0].observation.valid_actions


class Slow:
    """`EnvHost.simulate` that answers at most `left` probes in all, then none (the time is up)."""

    def __init__(self, host: EnvHost, left: int) -> None:
        self.host, self.left, self.calls = host, left, 0

    def __call__(self, probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        self.calls += 1
        answered, self.left = probes[:self.left], max(self.left - len(probes), 0)
        return self.host.simulate(answered, gamma)


def test_the_model_keeps_what_was_answered_and_search_stops_there(coin: EnvHost) -> None:
    config = SearchConfig(num_simulations=32, batch_size=8, rollout_depth=4, value_mix=1.0, prefetch_children=0)
    sandbox = Slow(coin, left=2 + 3)  # the root, its rollout, then 3 of the first round's 8 edges
    env = SearchModel(sandbox, SCORE, config)
    result = env.run()
    assert env.timed_out and result.stats.timed_out and result.stats.simulations == 3
    assert len(env.nodes) == 4  # the root and the 3 children the time allowed, each with its rollout
    assert sandbox.calls == 3  # the root, its rollout, one round: a leaf's rollout came with its step


def test_missing_rollouts_are_out_of_time_not_made_up(coin: EnvHost) -> None:
    env = SearchModel(Slow(coin, left=1), SCORE, SearchConfig(rollout_depth=4, value_mix=1.0, prefetch_children=0))
    env.root()
    with pytest.raises(SearchOutOfTime):
        env.evaluate([()])


def test_a_no_op_gets_no_rollout_and_a_leafs_rollout_rides_on_its_step(coin: EnvHost) -> None:
    (root,), _ = coin.simulate([sandbox_pb2.Probe()], 0.97)
    moves = [a for a in root.observation.valid_actions if a.startswith("move")]
    results, _ = coin.simulate([sandbox_pb2.Probe(actions=[a], rollout_depth=5) for a in ("inventory", moves[0])], 0.97)
    assert results[0].state_key == root.state_key and results[0].rollout_steps == 0  # search's dead end
    assert results[1].rollout_steps > 0
