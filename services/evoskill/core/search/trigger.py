"""When to search (seed 004 §4.1): where θ is sure, search spends environment steps to confirm what θ
would do anyway, and at a small budget its noise can overrule a right θ; where θ's choice is close, search
is what decides. θ's uncertainty is the normalised entropy of the root's prior."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normalised_entropy(logits: Sequence[float] | np.ndarray) -> float:
    """H(softmax(logits)) / log n, in 0..1: 0 = one action takes it all, 1 = uniform (and one action: 0)."""
    z = np.asarray(logits, dtype=np.float64)
    if z.size <= 1:
        return 0.0
    p = np.exp(z - z.max())
    p /= p.sum()
    nonzero = p[p > 0]
    return float(-(nonzero * np.log(nonzero)).sum() / np.log(z.size))


def needs_search(logits: Sequence[float] | np.ndarray, trigger: float) -> bool:
    """Search unless the prior is surer than `trigger` allows (trigger 0: always search)."""
    return trigger <= 0 or normalised_entropy(logits) >= trigger
