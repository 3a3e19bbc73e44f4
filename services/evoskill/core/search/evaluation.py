"""Leaf values and priors: one network call per batch, laid out for the kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from evoskill.core.search.types import EvaluateFn

NO_INTS = np.zeros(0, np.int64)


class LeafEvaluator:
    """Calls the network once per batch and lays its logits out for the kernels."""

    def __init__(self, evaluate: EvaluateFn | None) -> None:
        self.evaluate = evaluate
        self.calls = 0
        self.states_evaluated = 0

    def __call__(self, states: list[Any], num_actions: list[int]) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """Returns (logits, row starts, row width, values); see `expand_nodes` for the layout."""
        count = len(states)
        widest = max(num_actions)
        self.states_evaluated += count
        if self.evaluate is None:
            return np.zeros(count * widest), NO_INTS, widest, np.zeros(count)
        out = self.evaluate(states)
        self.calls += 1
        values = np.ascontiguousarray(out.values, dtype=np.float64)
        if values.shape != (count,):
            raise ValueError(f"evaluate returned values of shape {values.shape} for {count} states")
        logits, starts, width = layout_logits(out.logits, num_actions, count, widest)
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
