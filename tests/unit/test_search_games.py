"""Search finds the one winning path of small deterministic games; invariants hold on random ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.core.rollout import rollout
from evoskill.core.search import Evaluation, Root, SearchConfig, Transition, search

CODE = (2, 0, 1, 2)


def lock_step(state: tuple[int, ...], action: int) -> Transition:
    """A combination lock: 3 digits per turn, 4 turns, reward 1 only for CODE."""
    nxt = (*state, action)
    done = len(nxt) == len(CODE)
    return Transition(nxt, 1.0 if nxt == CODE else 0.0, done, nxt, 3)


def test_finds_the_combination_without_any_network() -> None:
    result = search(Root((), 3, key=()), lock_step, SearchConfig(num_simulations=300, seed=1))
    assert result.principal_variation() == list(CODE)
    assert result.action == CODE[0]
    assert result.q_values[CODE[0]] > 0.5 > np.nanmax(np.delete(result.q_values, CODE[0]))


class Lock:
    """The combination lock as the environment a rollout plays (what `core.rollout` reads of a TextEnv)."""

    def __init__(self, state: tuple[int, ...]) -> None:
        self.state, self.steps = state, 0

    @property
    def done(self) -> bool:
        return len(self.state) == len(CODE)

    @property
    def won(self) -> bool:
        return self.state == CODE

    lost = False
    score = 0.0  # only the win counts

    def valid_actions(self) -> list[str]:
        return ["0", "1", "2"]

    def template(self, action: str) -> str:
        return "turn X"

    def step(self, action: str) -> tuple[None, float]:
        self.state, self.steps = (*self.state, int(action)), self.steps + 1
        return None, 0.0


def test_finds_the_combination_with_rollouts() -> None:
    """Leaves valued by the search's one rollout (`core.rollout`): the win it stumbles on counts +1."""
    played: list[int] = []  # steps of each rollout

    def evaluate(states: Sequence[tuple[int, ...]]) -> Evaluation:
        values = []
        for state in states:
            lock = Lock(state)
            values.append(rollout(lock, 4, 1.0, seed=len(played)).total)
            played.append(lock.steps)
        return Evaluation(None, values)

    result = search(Root((), 3, key=()), lock_step, SearchConfig(num_simulations=150, gamma=1.0, seed=3), evaluate)
    assert sum(played) + result.stats.env_steps > result.stats.simulations  # rollouts step the environment too
    assert result.principal_variation() == list(CODE)


ITEMS = ("apple", "bread", "cheese")


def legal(state: frozenset[str]) -> list[str]:
    return [f"take {item}" for item in ITEMS if item not in state] + ["finish"]


def templates(actions: list[str]) -> list[int]:
    return [0 if a.startswith("take") else 1 for a in actions]


def kitchen_step(state: frozenset[str], action: int) -> Transition:
    """A text game: take the three items in any order, then finish (reward 1 only with all three)."""
    command = legal(state)[action]
    if command == "finish":
        return Transition(state, 1.0 if len(state) == len(ITEMS) else 0.0, True, None, 0)
    nxt = state | {command.removeprefix("take ")}
    actions = legal(nxt)
    return Transition(nxt, 0.0, False, nxt, len(actions), templates(actions))


def replay(actions: list[int]) -> list[str]:
    state: frozenset[str] = frozenset()
    commands = []
    for action in actions:
        commands.append(legal(state)[action])
        state = kitchen_step(state, action).state
    return commands


def test_text_game_with_variable_actions_and_transpositions() -> None:
    root = Root(frozenset(), len(legal(frozenset())), key=frozenset(), templates=templates(legal(frozenset())))
    for hierarchical in (False, True):
        config = SearchConfig(num_simulations=200, gamma=0.95, hierarchical=hierarchical, seed=5)
        result = search(root, kitchen_step, config)
        commands = replay(result.principal_variation())
        assert commands[-1] == "finish"
        assert sorted(commands[:-1]) == ["take apple", "take bread", "take cheese"]
        assert result.stats.transposition_hits > 0  # apple-then-bread is bread-then-apple
        assert result.stats.nodes < 1 + 4 + 4 * 3 + 4 * 3 * 2 + 4 * 3 * 2 * 1 + 16  # fewer than as a tree


ROOMS = {"hall": ["go north", "wait"], "attic": ["go south", "open chest"]}


def rooms_step(state: str, action: int) -> Transition:
    """Two rooms joined both ways (cycles); the chest in the attic wins."""
    command = ROOMS[state][action]
    if command == "open chest":
        return Transition("won", 1.0, True, "won", 0)
    nxt = {"go north": "attic", "go south": "hall", "wait": state}[command]
    return Transition(nxt, 0.0, False, nxt, 2)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_cycles_through_transpositions(batch_size: int) -> None:
    config = SearchConfig(num_simulations=100, batch_size=batch_size, early_stop_fraction=None)
    result = search(Root("hall", 2, key="hall"), rooms_step, config)
    tree = result.tree
    assert result.stats.nodes == 3  # hall, attic, won: every cycle closes on an existing node
    assert result.visit_counts.sum() == 100  # one root edge per simulation, cycles or not
    assert result.stats.max_depth <= 3
    assert not tree.node_virtual[: tree.num_nodes].any()
    assert result.principal_variation() == [0, 1]  # go north, open chest


def test_template_first_expansion_picks_the_template_first() -> None:
    # Action 0 alone in template 1 has the highest prior (0.4); template 0 holds the other three (0.2 each,
    # 0.6 together). Flat PUCT tries action 0 first; template-first tries template 0, then its action 1.
    logits = np.log([0.4, 0.2, 0.2, 0.2])

    def step(state: int, action: int) -> Transition:
        return Transition(action, 0.0, True, None, 0)

    def evaluate(states: Sequence[int]) -> Evaluation:
        return Evaluation([logits], [0.0])

    root = Root(-1, 4, templates=[1, 0, 0, 0])
    first = {}
    for hierarchical in (False, True):
        config = SearchConfig(num_simulations=1, hierarchical=hierarchical, dirichlet_weight=0.0)
        first[hierarchical] = search(root, step, config, evaluate).action
    assert first == {False: 0, True: 1}


class HashGame:
    """Random games: branching, depth and values from a hash of the path; keys collide on purpose."""

    def __init__(self, branching: int, depth: int, key_space: int) -> None:
        self.branching, self.depth, self.key_space = branching, depth, key_space

    def step(self, state: tuple[int, ...], action: int) -> Transition:
        nxt = (*state, action)
        key = (len(nxt), hash(nxt) % self.key_space)  # same depth, same key class: a transposition
        reward = (hash((nxt, 7)) % 7) / 7.0 - 0.4
        templates = [a % 2 for a in range(self.branching)]
        return Transition(nxt, reward, len(nxt) >= self.depth, key, self.branching, templates)

    def evaluate(self, states: Sequence[tuple[int, ...]]) -> Evaluation:
        logits = [np.array([(hash((s, a)) % 11) / 5.0 for a in range(self.branching)]) for s in states]
        return Evaluation(logits, [(hash(s) % 13) / 6.5 - 1.0 for s in states])


@settings(max_examples=40, deadline=None)
@given(
    branching=st.integers(1, 5),
    depth=st.integers(1, 5),
    simulations=st.integers(1, 60),
    batch_size=st.integers(1, 6),
    key_space=st.sampled_from([3, 10**9]),
    transpositions=st.booleans(),
    widening=st.sampled_from([None, 1.0]),
    hierarchical=st.booleans(),
)
def test_invariants(
    branching: int, depth: int, simulations: int, batch_size: int, key_space: int, transpositions: bool,
    widening: float | None, hierarchical: bool,
) -> None:  # fmt: skip
    game = HashGame(branching, depth, key_space)
    config = SearchConfig(
        num_simulations=simulations, batch_size=batch_size, transpositions=transpositions, widening_k=widening,
        hierarchical=hierarchical, early_stop_fraction=None, max_depth=8,
    )  # fmt: skip
    root = Root((), branching, key=(0, 0), templates=[a % 2 for a in range(branching)])
    result = search(root, game.step, config, game.evaluate)
    tree, stats = result.tree, result.stats

    assert stats.simulations == simulations
    assert result.visit_counts.sum() == simulations  # every simulation leaves the root by one edge
    assert tree.node_visits[0] == simulations + 1  # plus the root's own evaluation
    assert abs(result.priors.sum() - 1.0) < 1e-9
    assert not tree.node_virtual[: tree.num_nodes].any()
    assert not tree.edge_virtual[: tree.num_edges].any()
    assert stats.env_steps == stats.nodes - 1 + stats.transposition_hits
    assert 0 <= result.action < branching
    assert result.visit_counts[result.action] == result.visit_counts.max()
    for node in range(1, tree.num_nodes):
        # a node's first visit ends there; every later one leaves by one of its edges (or ends there)
        assert sum(int(tree.edge_visits[e]) for e in tree.edges(node)) <= tree.node_visits[node] - 1
    if not transpositions:
        assert stats.transposition_hits == 0
        for edge in range(tree.num_edges):
            child = int(tree.edge_child[edge])
            if child >= 0:
                assert tree.node_visits[child] == tree.edge_visits[edge]
