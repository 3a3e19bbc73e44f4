"""What the search takes and returns.

The environment and the network are plain callables (mctx style), not base classes:

- `StepFn(state, action) -> Transition`: one environment step. `state` is opaque to the search
  (a sandbox session handle, an action prefix, an int); `action` indexes the legal actions of
  `state`, 0..num_actions-1.
- `EvaluateFn(states) -> Evaluation`: the policy/value network, called once per batch of leaves.
- `StepBatchFn([(state, action), ...]) -> [Transition, ...]`: optional, all new edges of a batch
  in one call (a sandbox can run them on several workers at once); None for an edge it had no time to step.

A sandbox session as `step`: the state is a fork handle (or, for environments without
save/restore, the action prefix to replay); step forks it, plays `valid_actions(state)[action]`
and returns the new handle, the reward, done, a key for the new state (e.g. a hash of what the
environment reports as its state) and the number of valid actions, with one template (skill) id
per action for template-first search. Handles must stay alive until `search` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


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
StepBatchFn = Callable[[list[tuple[Any, int]]], Sequence[Transition | None]]  # None: out of time, not stepped
EvaluateFn = Callable[[Sequence[Any]], Evaluation]


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
    timed_out: bool = False  # the environment ran out of the search's time: fewer simulations than budgeted
