"""`search_compiled`: the whole MCTS loop in one numba function (mctx style, compiled callbacks).

`search` calls Python once per new edge (`step`) and once per batch (`evaluate`); on a cheap
environment those calls are most of the time. Here the environment model and the network are numba
functions passed as arguments, as mctx passes jitted `recurrent_fn`s, and select -> step -> evaluate
-> expand -> backup runs inside one compiled loop built from the same kernels as `search`, so with
the same config it returns the same tree.

States are rows of one numpy array (any numeric dtype, `state_width` columns): node n's state is
`result.states[n]`. The functions, compiled with numba's `njit` (or `evoskill.core.search.jit.jit`):

    step_fn(env_params, state, action, next_state) -> (reward, done, num_actions)
        writes the state `action` leads to into `next_state` (a row like `state`); num_actions is
        the number of legal actions there (at most `max_actions`); done or 0 actions: terminal.
    evaluate_fn(env_params, states, logits, values) -> None
        for each row i of `states` writes `values[i]` and prior logits `logits[i, :num_actions]`
        (`logits` has `max_actions` columns; the others are ignored).

`env_params` is passed to both unchanged (mctx's `params`): problem constants, network weights.

Left out: transpositions (every edge gets its own node; `config.transpositions` is ignored) and
template-first selection (no templates). Like `search`, it backs up what `evaluate_fn` returns: leaf
values mixed with rollouts are the environment model's business (`core.search.model`).

The loop is compiled for each pair of functions, with them bound as globals: numba cannot cache a
function that takes functions as arguments (it keys them by per-process identities), but caches
this one on disk like the kernels, under a name derived from the two functions' code and source
files. Like any cached numba code, it does not see edits to functions those two call in other files.
`warm_up_compiled` loads or compiles it ahead of the first search.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from evoskill.core.search.backup import expand_and_backup, top_two_visits
from evoskill.core.search.descend import (
    LEAF_ACTION,
    LEAF_FIELDS,
    LEAF_KIND,
    LEAF_NEW_EDGE,
    LEAF_NODE,
    LEAF_PARENT,
    collect_leaves,
)
from evoskill.core.search.expand import expand_nodes
from evoskill.core.search.jit import jit
from evoskill.core.search.puct import P_MAX_DEPTH, kernel_params
from evoskill.core.search.result import SearchResult
from evoskill.core.search.tree import NODE_FIRST_EDGE, NODE_NUM_EDGES, NODE_RAW_VALUE, NODE_VALUE_SUM, NODE_VISITS, Tree
from evoskill.core.search.types import SearchStats
from evoskill.core.search_config import SearchConfig

NO_FLOATS = np.zeros(0)

# Slots of the counters array the loop fills in.
C_SIMULATIONS = 0
C_NODES = 1
C_EDGES = 2
C_ENV_STEPS = 3
C_EVALUATIONS = 4
C_EVALUATED_STATES = 5
C_MAX_DEPTH = 6
C_EARLY_STOPPED = 7
C_FIELDS = 8


def _unbound(*args: Any) -> Any:
    raise RuntimeError("run_search runs only as bound by loop_for(step_fn, evaluate_fn)")


bound_step: Callable[..., Any] = _unbound  # rebound per pair in each loop's globals
bound_evaluate: Callable[..., Any] = _unbound


def run_search(
    node_int: np.ndarray,
    node_float: np.ndarray,
    edge_int: np.ndarray,
    edge_float: np.ndarray,
    q_bounds: np.ndarray,
    params: np.ndarray,
    states: np.ndarray,
    env_params: np.ndarray,
    root_actions: int,
    max_actions: int,
    root_noise: np.ndarray,
    noise_weight: float,
    budget: int,
    batch: int,
    stop_at: float,
    eval_states: np.ndarray,
    counters: np.ndarray,
) -> None:
    """The search loop (plain Python until bound by `loop_for`); `states[0]` holds the root, the
    tree is written in place."""
    no_ints = np.zeros(0, np.int64)
    max_depth = int(params[P_MAX_DEPTH])
    path_nodes = np.zeros((batch, max_depth), np.int64)
    path_edges = np.zeros((batch, max_depth), np.int64)
    leaves = np.zeros((LEAF_FIELDS, batch), np.int64)
    leaf_reward = np.zeros(batch)
    new_num_actions = np.zeros(batch, np.int64)
    no_templates = np.full(batch, -1, np.int64)
    logits_flat = np.zeros(batch * max_actions)
    logits = logits_flat.reshape((batch, max_actions))
    values = np.zeros(batch)

    # The root: evaluated once; Dirichlet noise goes into its priors only.
    bound_evaluate(env_params, states[0:1], logits[0:1], values[0:1])
    new_num_actions[0] = root_actions
    num_edges = expand_nodes(
        node_int, node_float, edge_int, edge_float, 0, 0, 1, new_num_actions, no_templates, no_ints,
        logits_flat, no_ints, max_actions, values, root_noise, noise_weight,
    )  # fmt: skip
    num_nodes = 1
    node_int[NODE_VISITS, 0] = 1  # the expansion counts as one visit
    node_float[NODE_VALUE_SUM, 0] = node_float[NODE_RAW_VALUE, 0]
    root_first, root_num = node_int[NODE_FIRST_EDGE, 0], node_int[NODE_NUM_EDGES, 0]

    simulations = env_steps = evaluations = evaluated = deepest = 0
    while simulations < budget:
        taken = collect_leaves(
            node_int, node_float, edge_int, edge_float, q_bounds, params, min(batch, budget - simulations),
            path_nodes, path_edges, leaves, no_ints,
        )  # fmt: skip
        new = 0
        count = 0
        for i in range(taken):
            if leaves[LEAF_KIND, i] != LEAF_NEW_EDGE:
                continue
            node = num_nodes + new
            parent, action = leaves[LEAF_PARENT, i], leaves[LEAF_ACTION, i]
            reward, done, num = bound_step(env_params, states[parent], action, states[node])
            if num > max_actions:
                raise ValueError("step_fn returned more actions than max_actions")
            if done or num < 0:
                num = 0
            leaf_reward[i] = reward
            leaves[LEAF_NODE, i] = node
            new_num_actions[new] = num
            if num > 0:
                eval_states[count] = states[node]
                count += 1
            new += 1
        env_steps += new
        if count > 0:
            bound_evaluate(env_params, eval_states[:count], logits[:count], values[:count])
            evaluations += 1
            evaluated += count
        edges_used, round_depth = expand_and_backup(
            node_int, node_float, edge_int, edge_float, q_bounds, params, num_nodes, num_edges, new,
            new_num_actions, no_templates, no_ints, logits_flat, no_ints, max_actions, values,
            taken, path_nodes, path_edges, leaves, leaf_reward,
        )  # fmt: skip
        num_nodes += new
        num_edges += edges_used
        simulations += taken
        deepest = max(deepest, round_depth)
        if simulations >= stop_at and simulations < budget:
            top, second = top_two_visits(edge_int, root_first, root_num)
            if top >= stop_at and top > second + (budget - simulations):
                counters[C_EARLY_STOPPED] = 1
                break
    counters[C_SIMULATIONS] = simulations
    counters[C_NODES] = num_nodes
    counters[C_EDGES] = num_edges
    counters[C_ENV_STEPS] = env_steps
    counters[C_EVALUATIONS] = evaluations + 1  # the root's
    counters[C_EVALUATED_STATES] = evaluated + 1
    counters[C_MAX_DEPTH] = deepest


_loops: dict[tuple[Any, Any], Callable[..., Any]] = {}


def _fingerprint(func: Any) -> bytes:
    """What identifies a jitted function across processes: its name, code and source file."""
    py_func = getattr(func, "py_func", func)
    code = py_func.__code__
    parts = [py_func.__module__, py_func.__qualname__, code.co_code.hex(), repr(code.co_consts)]
    try:
        stat = os.stat(inspect.getfile(py_func))
        parts += [str(stat.st_mtime_ns), str(stat.st_size)]
    except (OSError, TypeError):
        pass
    return "|".join(parts).encode()


def loop_for(step: Callable[..., Any], evaluate: Callable[..., Any]) -> Callable[..., Any]:
    """`run_search` with `step` and `evaluate` bound, jitted and cached on disk under its own name."""
    loop = _loops.get((step, evaluate))
    if loop is None:
        digest = hashlib.sha256(_fingerprint(step) + b"\0" + _fingerprint(evaluate)).hexdigest()[:20]
        bound = dict(run_search.__globals__, bound_step=step, bound_evaluate=evaluate)
        func = types.FunctionType(run_search.__code__, bound, "run_search", run_search.__defaults__)
        func.__qualname__ = f"run_search_{digest}"  # names the cache files
        loop = _loops[(step, evaluate)] = jit(func)
    return loop


def search_compiled(
    root_state: np.ndarray,
    num_actions: int,
    step_fn: Callable[..., Any],
    evaluate_fn: Callable[..., Any],
    config: SearchConfig | None = None,
    env_params: np.ndarray | None = None,
    max_actions: int | None = None,
) -> SearchResult:
    """Run MCTS from `root_state` (a 1-D array with `num_actions` legal actions); see the module doc.

    `max_actions` bounds every state's action count (default: the root's); it sizes the tree and
    the logits rows. Same result as `search` with the equivalent Python step/evaluate and
    transpositions off; `result.states` are the rows of the state array.
    """
    config = config or SearchConfig()
    started = time.perf_counter()
    root = np.ascontiguousarray(root_state)
    if root.ndim != 1:
        raise ValueError(f"root_state must be a 1-D array, not of shape {root.shape}")
    root_actions = max(num_actions, 0)
    width = root_actions if max_actions is None else max_actions
    if width < root_actions:
        raise ValueError(f"max_actions {width} < the root's {root_actions} actions")
    budget, batch = config.num_simulations, config.batch_size
    if config.algorithm != "puct":
        raise ValueError(f"search_compiled runs PUCT only, not {config.algorithm!r}")
    tree = Tree(node_capacity=budget + 1, edge_capacity=(budget + 1) * max(width, 1))
    states = np.zeros((budget + 1, len(root)), root.dtype)
    states[0] = root
    counters = np.zeros(C_FIELDS, np.int64)
    if root_actions:
        noise = NO_FLOATS
        if config.dirichlet_weight > 0.0:
            rng = np.random.default_rng(config.seed)  # as `search` draws it: same seed, same noise
            noise = rng.dirichlet(np.full(root_actions, config.dirichlet_alpha))
        stop_at = budget + 1.0 if config.early_stop_fraction is None else config.early_stop_fraction * budget
        loop_for(step_fn, evaluate_fn)(
            *tree.arrays, kernel_params(config), states,
            NO_FLOATS if env_params is None else env_params, root_actions, width, noise,
            float(config.dirichlet_weight), budget, batch, stop_at, np.zeros((batch, len(root)), root.dtype), counters,
        )  # fmt: skip
    else:  # a terminal root: one node, no edges, nothing evaluated
        counters[C_NODES] = 1
        tree.node_terminal[0] = 1
        tree.node_visits[0] = 1
    tree.num_nodes, tree.num_edges = int(counters[C_NODES]), int(counters[C_EDGES])
    stats = SearchStats(
        simulations=int(counters[C_SIMULATIONS]),
        nodes=tree.num_nodes,
        max_depth=int(counters[C_MAX_DEPTH]),
        env_steps=int(counters[C_ENV_STEPS]),
        evaluations=int(counters[C_EVALUATIONS]),
        evaluated_states=int(counters[C_EVALUATED_STATES]),
        transposition_hits=0,
        early_stopped=bool(counters[C_EARLY_STOPPED]),
        seconds=time.perf_counter() - started,
    )
    visits, q, priors = tree.node_statistics(0, config.gamma)
    edges = tree.edges(0)
    action = -1
    if len(edges):  # most visited, ties to the higher prior (as `search`)
        best = max(edges, key=lambda e: (int(tree.edge_visits[e]), float(tree.edge_prior[e]), -e))
        action = int(tree.edge_action[best])
    return SearchResult(action, visits, q, priors, tree.node_value(0), stats, tree, list(states[: tree.num_nodes]))


def warm_up_compiled(
    step_fn: Callable[..., Any],
    evaluate_fn: Callable[..., Any],
    root_state: np.ndarray,
    num_actions: int,
    env_params: np.ndarray | None = None,
    max_actions: int | None = None,
) -> float:
    """Compile the loop for these functions and argument types (a 2-simulation search); returns seconds.

    One compile covers every config: budgets, batch sizes and PUCT constants are run-time values.
    """
    started = time.perf_counter()
    config = SearchConfig(num_simulations=2, batch_size=2, dirichlet_weight=0.0)
    search_compiled(root_state, num_actions, step_fn, evaluate_fn, config, env_params, max_actions)
    return time.perf_counter() - started


# `warm_up_kernels`' toy problem: a chain with 2 actions per state, over after 2 steps.
@jit
def chain_step(env: np.ndarray, state: np.ndarray, action: int, next_state: np.ndarray) -> tuple[float, bool, int]:
    next_state[0] = state[0] + 1
    return float(action), next_state[0] >= 2, 2


@jit
def chain_evaluate(env: np.ndarray, states: np.ndarray, logits: np.ndarray, values: np.ndarray) -> None:
    for i in range(states.shape[0]):
        logits[i, 0] = 0.0
        logits[i, 1] = 0.0
        values[i] = 0.0


def warm_up_kernels() -> float:
    """Load (or compile) the kernels as the compiled loop calls them, on a toy chain; returns seconds.

    The loop itself is compiled per pair of functions: a service loads its own with
    `warm_up_compiled` (from the disk cache after the first time).
    """
    return warm_up_compiled(chain_step, chain_evaluate, np.zeros(1, np.int64), 2)
