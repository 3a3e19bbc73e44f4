"""Leaf values and priors: one network call per batch, optional bounded rollouts mixed in."""

from __future__ import annotations

from typing import Any

import numpy as np

from evoskill.core.search.types import EvaluateFn, RolloutPolicy, SearchConfig, StepFn

NO_INTS = np.zeros(0, np.int64)


def rollout(
    step: StepFn,
    policy: RolloutPolicy | None,
    state: Any,
    num_actions: int,
    depth: int,
    gamma: float,
    rng: np.random.Generator,
) -> tuple[float, int]:
    """Discounted return of at most `depth` steps from `state`; returns (return, steps taken)."""
    total, discount, steps = 0.0, 1.0, 0
    while steps < depth and num_actions > 0:
        action = policy(state, num_actions, rng) if policy is not None else int(rng.integers(num_actions))
        transition = step(state, action)
        steps += 1
        total += discount * float(transition.reward)
        discount *= gamma
        if transition.done:
            break
        state, num_actions = transition.state, transition.num_actions
    return total, steps


class LeafEvaluator:
    """Calls the network once per batch, mixes in rollouts, lays logits out for the kernels."""

    def __init__(
        self,
        evaluate: EvaluateFn | None,
        step: StepFn,
        rollout_policy: RolloutPolicy | None,
        config: SearchConfig,
        rng: np.random.Generator,
    ) -> None:
        self.evaluate, self.step, self.rollout_policy = evaluate, step, rollout_policy
        self.config, self.rng = config, rng
        self.calls = 0
        self.states_evaluated = 0
        self.rollout_steps = 0

    def __call__(self, states: list[Any], num_actions: list[int]) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """Returns (logits, row starts, row width, values); see `expand_nodes` for the layout."""
        count = len(states)
        widest = max(num_actions)
        if self.evaluate is None:
            logits, starts, width, values = np.zeros(count * widest), NO_INTS, widest, np.zeros(count)
        else:
            out = self.evaluate(states)
            self.calls += 1
            values = np.ascontiguousarray(out.values, dtype=np.float64)
            if values.shape != (count,):
                raise ValueError(f"evaluate returned values of shape {values.shape} for {count} states")
            logits, starts, width = layout_logits(out.logits, num_actions, count, widest)
        self.states_evaluated += count
        mix = self.config.value_mix
        if mix > 0.0:
            returns = np.empty(count)
            for i, (state, actions) in enumerate(zip(states, num_actions, strict=True)):
                returns[i], steps = rollout(
                    self.step, self.rollout_policy, state, actions, self.config.rollout_depth,
                    self.config.gamma, self.rng,
                )  # fmt: skip
                self.rollout_steps += steps
            values = (1.0 - mix) * values + mix * returns
        return logits, starts, width, values


def layout_logits(logits: Any, num_actions: list[int], count: int, widest: int) -> tuple[np.ndarray, np.ndarray, int]:
    if logits is None:
        return np.zeros(count * widest), NO_INTS, widest
    if isinstance(logits, np.ndarray) and logits.ndim == 2:
        if logits.shape[0] != count or logits.shape[1] < widest:
            raise ValueError(f"logits of shape {logits.shape} for {count} states with up to {widest} actions")
        rows = np.ascontiguousarray(logits, dtype=np.float64)
        return rows.reshape(-1), NO_INTS, rows.shape[1]
    parts = [np.asarray(row, dtype=np.float64).reshape(-1) for row in logits]
    if len(parts) != count or any(len(row) != n for row, n in zip(parts, num_actions, strict=True)):
        raise ValueError("evaluate must return one logit per legal action of each state")
    starts = np.zeros(count, dtype=np.int64)
    np.cumsum([len(row) for row in parts[:-1]], out=starts[1:])
    return np.concatenate(parts), starts, 0
