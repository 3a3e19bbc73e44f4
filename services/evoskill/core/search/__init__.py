"""MCTS search core: small pure functions over an array-backed tree (mctx style).

The environment and the network are arguments, not base classes:

    result = search(Root(state, num_actions, key), step, SearchConfig(num_simulations=200), evaluate)
    result.action, result.visit_counts, result.q_values, result.priors, result.stats

`step(state, action) -> Transition(next_state, reward, done, key, num_actions, templates)` is one
environment step; states are opaque to the search (a sandbox fork handle, an action prefix...), so
the planner wraps a sandbox session as `step`. `evaluate(states) -> Evaluation(logits, values)` is the
batched network. Selection, expansion and backup are JIT kernels (numba when installed).
`SearchConfig` (core/search_config.py) is every setting of a search, the product's defaults.

`core.search.model.SearchModel` is the environment model the planner searches with: a sandbox session
as `step`/`step_batch`/`evaluate`, with no-op pruning, revisit shaping, transposition keys, rollouts and
the value mix; `core.search.advice` holds the prior transforms (θ, memories, an LLM).

`search_compiled(root_state, num_actions, step_fn, evaluate_fn, config, env_params)` is the same
search with step and evaluate given as numba functions over array states: the whole loop compiled.
"""

from evoskill.core.search.compiled import search_compiled, warm_up_compiled
from evoskill.core.search.jit import HAVE_NUMBA
from evoskill.core.search.mcts import search, warm_up
from evoskill.core.search.result import SearchResult
from evoskill.core.search.tree import NO_CHILD, Tree, TreeArrays
from evoskill.core.search.types import (
    EvaluateFn,
    Evaluation,
    Root,
    SearchStats,
    StepBatchFn,
    StepFn,
    Transition,
)
from evoskill.core.search_config import SearchConfig

__all__ = [
    "HAVE_NUMBA",
    "NO_CHILD",
    "EvaluateFn",
    "Evaluation",
    "Root",
    "SearchConfig",
    "SearchResult",
    "SearchStats",
    "StepBatchFn",
    "StepFn",
    "Transition",
    "Tree",
    "TreeArrays",
    "search",
    "search_compiled",
    "warm_up",
    "warm_up_compiled",
]
