"""What the search takes and returns.

The environment and the network are plain callables (mctx style), not base classes:

- `StepFn(state, action) -> Transition`: one environment step. `state` is opaque to the search
  (a sandbox session handle, an action prefix, an int); `action` indexes the legal actions of
  `state`, 0..num_actions-1.
- `EvaluateFn(states) -> Evaluation`: the policy/value network, called once per batch of leaves.
- `StepBatchFn([(state, action), ...]) -> [Transition, ...]`: optional, all new edges of a batch
  in one call (a sandbox can run them on several workers at once).

A sandbox session as `step`: the state is a fork handle (or, for environments without
save/restore, the action prefix to replay); step forks it, plays `valid_actions(state)[action]`
and returns the new handle, the reward, done, a key for the new state (e.g. a hash of what the
environment reports as its state) and the number of valid actions, with one template (skill) id
per action for template-first search. Handles must stay alive until `search` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from evoskill.core.errors import InvalidInput


class Transition(NamedTuple):
    """One environment step, as the search needs it."""

    state: Any
    reward: float
    done: bool
    key: Hashable | None  # transposition key of `state`; None: never share this node
    num_actions: int  # legal actions in `state`; 0 makes the node terminal
    templates: Sequence[int] | np.ndarray | None = None  # template (skill) id per action


class Root(NamedTuple):
    """The state the search starts from."""

    state: Any
    num_actions: int
    key: Hashable | None = None
    templates: Sequence[int] | np.ndarray | None = None


class Evaluation(NamedTuple):
    """Network output for a batch of states.

    `logits`: one row per state (a 2-D array at least as wide as every state's action count, extra
    columns ignored, or a sequence of 1-D arrays), or None for uniform priors. `values`: one value
    per state, from the point of view of the player to move (single agent: expected return).
    """

    logits: np.ndarray | Sequence[np.ndarray] | None
    values: np.ndarray | Sequence[float]


StepFn = Callable[[Any, int], Transition]
StepBatchFn = Callable[[list[tuple[Any, int]]], Sequence[Transition]]
EvaluateFn = Callable[[Sequence[Any]], Evaluation]


@dataclass(frozen=True)
class SearchConfig:
    """Every MCTS knob of seed 000 §4, plus the engineering ones.

    PUCT: score(s,a) = Q(s,a) + c_puct * P(s,a) * sqrt(N(s)) / (1 + N(s,a)), with N(s) the node's
    visit count (the expansion counts as one visit, as in mctx) and Q(s,a) = r(s,a) + gamma * V(child).
    `normalize_q`: Q is min-max normalised by the smallest and largest Q seen so far in this search
    (MuZero's MinMaxStats), so c_puct does not depend on the reward scale; off, Q is used raw.

    `algorithm="gumbel"`: Gumbel MuZero (core/search/gumbel.py): sequential halving among
    `gumbel_max_actions` root actions, the deterministic non-root rule, and the improved policy as the
    result's `policy_target`. The PUCT knobs (c_puct, Dirichlet noise, early stop, widening, template-first
    selection, virtual loss, batch_size: a halving level is one batch) do not apply to it.
    """

    num_simulations: int = 200  # seed §4: 50-2000
    c_puct: float = 1.414  # seed §4: 1.0-2.5, start at 1.414
    dirichlet_alpha: float = 0.3
    dirichlet_weight: float = 0.25  # share of root prior replaced by noise; 0 disables noise
    rollout_depth: int = 10  # seed §4: 5-20 steps per rollout
    gamma: float = 0.97  # seed §4: 0.95-0.99
    early_stop_fraction: float | None = 0.8  # seed §5.1; None: always spend the full budget
    max_children: int | None = None  # hard cap on children considered per node
    widening_k: float | None = None  # progressive widening: consider ceil(k * N(s)^alpha) children
    widening_alpha: float = 0.5
    hierarchical: bool = False  # template first, then arguments, where actions carry templates
    batch_size: int = 1  # leaves evaluated per network call (under virtual loss); not the learner's
    virtual_loss: float = 1.0  # each in-flight visit counts as returning -virtual_loss (in Q units)
    unvisited_q: Literal["parent"] | float = "parent"  # Q of unvisited children: parent's value or a constant
    normalize_q: bool = True
    transpositions: bool = True  # nodes with equal state keys are one node (a DAG)
    max_depth: int = 64  # selection stops here (guards cycles through transpositions)
    seed: int = 0
    algorithm: Literal["puct", "gumbel"] = "puct"
    gumbel_max_actions: int = 16  # root actions sampled without replacement (Gumbel-top-k)
    gumbel_c_visit: float = 50.0  # sigma(q) = (c_visit + max N) * c_scale * q, q min-max normalised
    gumbel_c_scale: float = 0.1
    gumbel_scale: float = 1.0  # of the root's Gumbel noise; 0: the top-m by prior, no exploration (evaluation)

    def __post_init__(self) -> None:
        if self.num_simulations < 1:
            raise InvalidInput("num_simulations must be >= 1")
        if self.batch_size < 1:
            raise InvalidInput("batch_size must be >= 1")
        if not 0.0 <= self.dirichlet_weight <= 1.0:
            raise InvalidInput("dirichlet_weight must be in [0, 1]")
        if self.dirichlet_weight > 0 and self.dirichlet_alpha <= 0:
            raise InvalidInput("dirichlet_alpha must be > 0")
        if not 0.0 <= self.gamma <= 1.0:
            raise InvalidInput("gamma must be in [0, 1]")
        if self.early_stop_fraction is not None and not 0.0 < self.early_stop_fraction <= 1.0:
            raise InvalidInput("early_stop_fraction must be in (0, 1] or None")
        if self.max_children is not None and self.max_children < 1:
            raise InvalidInput("max_children must be >= 1")
        if self.widening_k is not None and self.widening_k <= 0:
            raise InvalidInput("widening_k must be > 0")
        if self.max_depth < 1 or self.rollout_depth < 0:
            raise InvalidInput("max_depth must be >= 1 and rollout_depth >= 0")
        if isinstance(self.unvisited_q, str) and self.unvisited_q != "parent":
            raise InvalidInput("unvisited_q must be 'parent' or a number")
        if self.algorithm not in ("puct", "gumbel"):
            raise InvalidInput(f"algorithm must be 'puct' or 'gumbel', not {self.algorithm!r}")
        if self.gumbel_max_actions < 1:
            raise InvalidInput("gumbel_max_actions must be >= 1")
        if self.gumbel_c_visit < 0 or self.gumbel_c_scale <= 0 or self.gumbel_scale < 0:
            raise InvalidInput("gumbel_c_visit and gumbel_scale must be >= 0, gumbel_c_scale > 0")


@dataclass(frozen=True)
class SearchStats:
    simulations: int  # leaves backed up (the root evaluation is not one)
    nodes: int
    max_depth: int  # deepest leaf reached, in edges from the root
    env_steps: int  # step() calls
    evaluations: int  # calls of the evaluate function (batches)
    evaluated_states: int  # states sent to it
    transposition_hits: int  # new edges that led to an existing node
    early_stopped: bool
    seconds: float
