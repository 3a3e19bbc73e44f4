"""The LLM's prior over a node's actions and its combination with θ's (`llm.combine`, `llm.prior_weight`).

The LLM names actions best first; its prior gives the k named ones 1/(1 + rank) and every other action
1/(2 + k), just below its last choice (an action it left out is not ruled out), normalised. With θ's
prior p_θ (uniform where no θ advises) and weight w:

- ``product``: p ∝ p_θ · p_LLM^w, i.e. θ's logits + w · log p_LLM (w ≥ 0; 0 = the LLM ignored);
- ``mix``: p = (1 - w) · p_θ + w · p_LLM (0 ≤ w ≤ 1; 1 = the LLM alone).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

COMBINE_RULES = ("product", "mix")


def llm_prior(named: Sequence[int], n: int) -> np.ndarray:
    """The prior of n actions, of which `named` (indices, best first, distinct) were the LLM's choices."""
    scores = np.full(n, 1.0 / (2 + len(named)), dtype=np.float64)
    for rank, i in enumerate(named):
        scores[i] = 1.0 / (1 + rank)
    return scores / scores.sum()


def combine(logits: np.ndarray | None, prior: np.ndarray, rule: str, weight: float) -> np.ndarray:
    """θ's logits (None = uniform) combined with the LLM's prior by `rule`, as logits."""
    n = len(prior)
    base = np.zeros(n, dtype=np.float64) if logits is None else np.asarray(logits, dtype=np.float64)[:n]
    if rule == "product":
        return base + weight * np.log(prior)
    if rule == "mix":
        theta = np.exp(base - base.max())
        mixed = (1.0 - weight) * theta / theta.sum() + weight * prior
        return np.log(np.maximum(mixed, 1e-12))
    raise ValueError(f"combine rule {rule!r} is not one of {', '.join(COMBINE_RULES)}")
