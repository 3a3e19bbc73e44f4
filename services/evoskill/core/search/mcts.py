"""`search`: MCTS over an environment given as a step function (mctx style, Python callbacks).

One round: select up to `batch_size` leaves under virtual loss (JIT), step the environment once per
new edge (Python: states are opaque), evaluate all new states with ONE call of `evaluate`, then
expand and back up (JIT). Rounds repeat until the budget is spent or the root's most visited action
can no longer be overtaken (early stop); `cancelled()`, when given, is asked before each round, and a
search nobody waits for any more ends there with `SearchCancelled`. Anytime: an environment out of time
answers None for the edges it could not step (the round goes on with the others) or raises `SearchOutOfTime`
(the round is dropped), and the search returns what it has after that round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from evoskill.core.search.backup import expand_and_backup, top_two_visits
from evoskill.core.search.compiled import warm_up_kernels
from evoskill.core.search.descend import (
    LEAF_DEPTH,
    LEAF_FIELDS,
    LEAF_KIND,
    LEAF_NEW_EDGE,
    LEAF_NODE,
    LEAF_TRANSPOSITION,
    collect_leaves,
)
from evoskill.core.search.evaluation import LeafEvaluator
from evoskill.core.search.expand import expand_nodes
from evoskill.core.search.gumbel import GumbelRoot
from evoskill.core.search.puct import kernel_params
from evoskill.core.search.result import SearchResult
from evoskill.core.search.tree import EDGE_VIRTUAL, NODE_VIRTUAL, Tree
from evoskill.core.search.types import EvaluateFn, Root, SearchStats, StepBatchFn, StepFn, Transition
from evoskill.core.search_config import SearchConfig

_NO_INTS = np.zeros(0, np.int64)
_NO_FLOATS = np.zeros(0)


class SearchCancelled(Exception):
    """The caller of a search no longer wants its result (its call was cancelled or ran past its deadline)."""


class SearchOutOfTime(Exception):
    """Raised by `evaluate` or `step_batch` whose environment ran out of the search's time: the round in
    progress is dropped and the search returns what it has (`SearchStats.timed_out`)."""


def _templates(templates: Any, num_actions: int) -> np.ndarray:
    out = np.ascontiguousarray(templates, dtype=np.int64).reshape(-1)
    if len(out) != num_actions:
        raise ValueError(f"{len(out)} templates for {num_actions} actions")
    return out


def search(
    root: Root,
    step: StepFn,
    config: SearchConfig | None = None,
    evaluate: EvaluateFn | None = None,
    step_batch: StepBatchFn | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> SearchResult:
    """Run MCTS from `root` and return the chosen action with root and tree statistics.

    `step(state, action) -> Transition` must be deterministic for a given (state, action): each
    edge is stepped once and its child cached, so `state` objects must stay valid until the search
    returns. `evaluate(states) -> Evaluation` gives prior logits and values (uniform priors and
    value 0 without it); leaf values are backed up as it gives them (rollouts, and their mix with a
    value network, belong to the environment model: `core.search.model`). `step_batch([(state,
    action), ...]) -> [Transition, ...]`, if given, replaces `step` for the new edges of a batch (e.g.
    to run them on several sandbox workers at once).
    """
    config = config or SearchConfig()
    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    params = kernel_params(config)
    evaluator = LeafEvaluator(evaluate)
    budget = config.num_simulations
    tree = Tree(node_capacity=budget + 1, edge_capacity=(budget + 1) * max(root.num_actions, 1))
    states: list[Any] = [root.state]
    key_to_node: dict[Hashable, int] = {}
    transpositions = config.transpositions
    if transpositions and root.key is not None:
        key_to_node[root.key] = 0
    gumbel: GumbelRoot | None = None  # set once the root is expanded, with algorithm="gumbel"

    def result(simulations: int, env_steps: int, hits: int, deepest: int, early: bool,
               timed_out: bool = False) -> SearchResult:
        visits, q, priors = tree.node_statistics(0, config.gamma)
        edges = tree.edges(0)
        action = -1
        if len(edges):
            best = max(edges, key=lambda e: (int(tree.edge_visits[e]), float(tree.edge_prior[e]), -e))
            action = int(tree.edge_action[best])
        policy_target = None
        if gumbel is not None and len(edges):
            action, policy_target = gumbel.decide(tree)
        stats = SearchStats(
            simulations=simulations,
            nodes=tree.num_nodes,
            max_depth=deepest,
            env_steps=env_steps,
            evaluations=evaluator.calls,
            evaluated_states=evaluator.states_evaluated,
            transposition_hits=hits,
            early_stopped=early,
            seconds=time.perf_counter() - started,
            timed_out=timed_out,
        )
        return SearchResult(action, visits, q, priors, tree.node_value(0), stats, tree, states, policy_target)

    # The root: evaluated once; Dirichlet noise goes into its priors only.
    root_actions = max(root.num_actions, 0)
    tree.reserve(1, root_actions)
    if root_actions:
        logits, starts, width, values = evaluator([root.state], [root_actions])
    else:
        logits, starts, width, values = _NO_FLOATS, _NO_INTS, 0, _NO_FLOATS
    templated = config.hierarchical and root.templates is not None and root_actions > 0
    noise = _NO_FLOATS
    noise_weight = float(config.dirichlet_weight) if config.algorithm == "puct" else 0.0  # Gumbel: its own noise
    if noise_weight > 0.0 and root_actions:
        noise = rng.dirichlet(np.full(root_actions, config.dirichlet_alpha))
    tree.num_edges = expand_nodes(
        *tree.arrays[:4], 0, 0, 1, np.array([root_actions], np.int64), np.array([0 if templated else -1]),
        _templates(root.templates, root_actions) if templated else _NO_INTS,
        logits, starts, width, values, noise, noise_weight,
    )  # fmt: skip
    tree.num_nodes = 1
    tree.node_visits[0] = 1
    tree.node_value_sum[0] = tree.node_raw_value[0]
    if not root_actions:
        return result(0, 0, 0, 0, False)
    if config.algorithm == "gumbel":
        gumbel = GumbelRoot.start(tree, config, params, rng)

    # Per-batch buffers, reused every round.
    batch = config.batch_size if gumbel is None else min(config.gumbel_max_actions, root_actions)
    path_nodes = np.zeros((batch, config.max_depth), np.int64)
    path_edges = np.zeros((batch, config.max_depth), np.int64)
    leaves = np.zeros((LEAF_FIELDS, batch), np.int64)
    leaf_reward = np.zeros(batch)
    new_num_actions = np.zeros(batch, np.int64)
    new_template_start = np.full(batch, -1, np.int64)
    hierarchical = config.hierarchical

    simulations = env_steps = hits = deepest = 0
    early_stopped = timed_out = False
    root_first, root_num = int(tree.node_first_edge[0]), int(tree.node_num_edges[0])
    stop_at = budget + 1.0  # never; and Gumbel's halving spends its whole budget by design
    if config.early_stop_fraction is not None and gumbel is None:
        stop_at = config.early_stop_fraction * budget
    while simulations < budget:
        if cancelled is not None and cancelled():
            raise SearchCancelled(f"search cancelled after {simulations} of {budget} simulations")
        arrays = tree.arrays
        root_edges = _NO_INTS if gumbel is None else gumbel.next_round(tree, simulations)
        wanted = min(batch, budget - simulations) if gumbel is None else len(root_edges)
        taken = collect_leaves(*arrays, params, wanted, path_nodes, path_edges, leaves, root_edges)
        try:
            taken, transitions, timed_out = _step_round(taken, leaves, path_nodes, path_edges, tree, states, step,
                                                        step_batch)
        except SearchOutOfTime:  # the search ends with the round: the virtual loss it leaves never selects again
            return result(simulations, env_steps, hits, deepest, False, timed_out=True)
        kinds = leaves[LEAF_KIND, :taken].tolist()
        first_node = tree.num_nodes
        new = 0
        eval_states: list[Any] = []
        eval_actions: list[int] = []
        templates: list[np.ndarray] = []
        template_cursor = 0
        stepped = [i for i in range(taken) if kinds[i] == LEAF_NEW_EDGE]
        for i, transition in zip(stepped, transitions, strict=True):
            leaf_reward[i] = transition.reward
            key = transition.key
            if transpositions and key is not None:
                existing = key_to_node.get(key)
                if existing is not None:
                    leaves[LEAF_NODE, i] = existing
                    leaves[LEAF_KIND, i] = LEAF_TRANSPOSITION
                    hits += 1
                    continue
                key_to_node[key] = first_node + new
            leaves[LEAF_NODE, i] = first_node + new
            states.append(transition.state)
            num_actions = 0 if transition.done else max(transition.num_actions, 0)
            new_num_actions[new] = num_actions
            if num_actions:
                eval_states.append(transition.state)
                eval_actions.append(num_actions)
                if hierarchical:
                    new_template_start[new] = -1
                    if transition.templates is not None:
                        templates.append(_templates(transition.templates, num_actions))
                        new_template_start[new] = template_cursor
                        template_cursor += num_actions
            new += 1
        env_steps += len(stepped)

        if eval_states:
            try:
                logits, starts, width, values = evaluator(eval_states, eval_actions)
            except SearchOutOfTime:
                return result(simulations, env_steps, hits, deepest, False, timed_out=True)
            tree.reserve(new, sum(eval_actions))
        else:
            logits, starts, width, values = _NO_FLOATS, _NO_INTS, 0, _NO_FLOATS
            tree.reserve(new, 0)
        edges_used, round_depth = expand_and_backup(
            *tree.arrays, params, first_node, tree.num_edges, new, new_num_actions, new_template_start,
            np.concatenate(templates) if templates else _NO_INTS, logits, starts, width, values,
            taken, path_nodes, path_edges, leaves, leaf_reward,
        )  # fmt: skip
        tree.num_nodes += new
        tree.num_edges += edges_used
        simulations += taken
        deepest = max(deepest, round_depth)
        if timed_out:
            break

        if simulations >= stop_at and simulations < budget:
            top, second = top_two_visits(tree.arrays.edge_int, root_first, root_num)
            if top >= stop_at and top > second + (budget - simulations):
                early_stopped = True
                break
    return result(simulations, env_steps, hits, deepest, early_stopped, timed_out)


def _step_round(taken: int, leaves: np.ndarray, path_nodes: np.ndarray, path_edges: np.ndarray, tree: Tree,
                states: list[Any], step: StepFn,
                step_batch: StepBatchFn | None) -> tuple[int, list[Transition], bool]:
    """Step the round's new edges; the leaves whose edge the environment left unstepped (None: out of time)
    are dropped and the rest moved to the front. Returns how many leaves are kept, the transitions of their
    new edges in order, and whether any was dropped."""
    kinds, parents, actions = leaves[:3, :taken].tolist()
    stepped = [i for i in range(taken) if kinds[i] == LEAF_NEW_EDGE]
    if step_batch is None:
        answered: list[Transition | None] = [step(states[parents[i]], actions[i]) for i in stepped]
    else:
        answered = list(step_batch([(states[parents[i]], actions[i]) for i in stepped]))
        if len(answered) != len(stepped):
            raise ValueError(f"step_batch returned {len(answered)} transitions for {len(stepped)} steps")
    by_leaf = dict(zip(stepped, answered, strict=True))
    dropped = [i for i in stepped if by_leaf[i] is None]
    transitions = [t for t in answered if t is not None]
    if not dropped:
        return taken, transitions, False
    _drop_leaves(tree, dropped, leaves, path_nodes, path_edges)
    kept = [i for i in range(taken) if i not in set(dropped)]
    leaves[:, :len(kept)] = leaves[:, kept]
    path_nodes[:len(kept)] = path_nodes[kept]
    path_edges[:len(kept)] = path_edges[kept]
    return len(kept), transitions, True


def _drop_leaves(tree: Tree, dropped: Any, leaves: np.ndarray, path_nodes: np.ndarray,
                 path_edges: np.ndarray) -> None:
    """Take back the virtual loss `collect_leaves` put on the paths of leaves that will not be backed up."""
    node_int, edge_int = tree.arrays.node_int, tree.arrays.edge_int
    for i in dropped:
        depth = int(leaves[LEAF_DEPTH, i])
        if leaves[LEAF_KIND, i] != LEAF_NEW_EDGE:
            node_int[NODE_VIRTUAL, leaves[LEAF_NODE, i]] -= 1
        for d in range(depth):
            edge_int[EDGE_VIRTUAL, path_edges[i, d]] -= 1
            node_int[NODE_VIRTUAL, path_nodes[i, d]] -= 1


def warm_up() -> float:
    """Compile every kernel, or load it from numba's on-disk cache; returns the seconds it took.

    Covers `search` and the kernels of `search_compiled` (whose loop is compiled per pair of step and
    evaluate functions: see `warm_up_compiled`).

    A cold compile takes several seconds: services call this at start-up, images at build time.
    """
    started = time.perf_counter()

    def step(state: int, action: int) -> Transition:
        return Transition(state + 1, 0.0, state >= 2, state + 1, 2, (0, 1))

    config = SearchConfig(num_simulations=4, batch_size=2, hierarchical=True, widening_k=1.0, early_stop_fraction=0.25)
    search(Root(0, 2, key=0, templates=(0, 1)), step, config)
    warm_up_kernels()
    return time.perf_counter() - started
